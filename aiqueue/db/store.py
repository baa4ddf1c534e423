"""The queue's PostgreSQL gateway: one method per named query (LISTEN: listener.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from aiqueue.db.batch import BatchQueries
from aiqueue.db.doctor import DoctorQueries
from aiqueue.db.gateway import connect_pool, queries
from aiqueue.db.outbox import OutboxQueries
from aiqueue.db.pool import Rollback
from aiqueue.db.records import RecordsQueries
from aiqueue.db.recovery import RecoveryQueries
from aiqueue.db.review import ReviewQueries
from aiqueue.db.security import SecurityQueries
from aiqueue.db.timing import TimeQueries
from aiqueue.errors import Conflict
from aiqueue.flow import NO_BUDGET, Budget, FlowState, KindCount, PoolState
from aiqueue.models import (
    AssignmentInfo,
    Attempt,
    Control,
    DryRun,
    Enqueued,
    EnqueueOutcome,
    EventBatch,
    EventCursor,
    Job,
    KeyMismatch,
    MarkingEvent,
    QueueId,
    QueueRow,
    Replayed,
    RunProgress,
    Stats,
    Status,
    SubmissionId,
    SubmissionResult,
    SubmissionStatus,
    UnknownIds,
)
from aiqueue.money import NO_MONEY, Money

__all__ = ["Store", "connect_pool", "queries"]


# How often an enqueue runs when it keeps losing a race for a live row.
_ENQUEUE_RUNS = 5
# The partial unique index that allows one live (pending/processing) row per submission.
_LIVE_ROW_INDEX = "ai_marking_queue_active_uniq"


def _budgeted(plan: str | None) -> bool:
    """Whether a plan's pools declare a budget (the result then corrects the window)."""
    return plan is not None and any(
        p["tpm"] > 0 or p["rpm"] > 0 for p in json.loads(plan)["pools"])


class _LostRace:
    """A run of the enqueue that rolled back: another transaction took a live row first."""


def _takes_a_live_row(exc: asyncpg.PostgresError) -> bool:
    """Did a statement fail because another transaction gave a submission a live row?"""
    if isinstance(exc, asyncpg.DeadlockDetectedError):
        # Two overlapping batches waiting on each other's index entries.
        return True
    return (isinstance(exc, asyncpg.UniqueViolationError)
            and exc.constraint_name == _LIVE_ROW_INDEX)


class Store(ReviewQueries, SecurityQueries, OutboxQueries, RecoveryQueries, DoctorQueries,
            BatchQueries, RecordsQueries, TimeQueries):
    """Queue persistence: each method one named query, bounded by db/pool.py."""

    # -- the loop ---------------------------------------------------------

    async def enqueue(
        self,
        submission_ids: Sequence[UUID | str],
        assignment_id: str,
        priority: int,
        payload: str | Mapping[str, Any],
        *,
        group: str | None = None,
        remark: bool = False,
        key: tuple[str, str] | None = None,
        kind: str = "mark",
        pool: str = "default",
        not_before: datetime | None = None,
        expires_at: datetime | None = None,
        batch: tuple[datetime, datetime] | None = None,
    ) -> EnqueueOutcome:
        """Enqueue atomically; with `key` (Idempotency-Key, body hash) at most once per key.

        `payload` is the JSON text the request's parser made (or an object, serialised here).
        `kind` and its `pool` are stored on every row (CONTRACT §9b).
        `not_before` / `expires_at`: when the rows become due, and when they expire.
        `batch` (deadline, live time) puts the new rows on the overnight lane in the
        same transaction, so no live claim can take them first.
        """
        text = payload if isinstance(payload, str) else json.dumps(payload)
        args = (list(submission_ids), assignment_id, priority, text, group or assignment_id,
                remark, kind, pool, not_before, expires_at)
        for _ in range(_ENQUEUE_RUNS):
            # Idempotent by design: a repeat skips what the first run inserted,
            # and a key's repeat replays the answer the first run saved.
            outcome = await self.db.write(
                lambda conn: self._enqueue_in(conn, args, key, len(submission_ids), batch),
                idempotent=True)
            if not isinstance(outcome, _LostRace):
                return outcome
            # The run rolled back; the next one skips the submission that got a live row.
        raise Conflict("the submissions' live rows kept changing; try again")

    async def _enqueue_in(self, conn: asyncpg.Connection, args: tuple[Any, ...],
                          key: tuple[str, str] | None, requested: int,
                          batch: tuple[datetime, datetime] | None = None,
                          ) -> EnqueueOutcome | _LostRace:
        """The enqueue's transaction (db.write runs it; Rollback undoes it)."""
        if key is not None and not await conn.fetchval(self.sql["idempotency_claim"], *key):
            # The key's first request committed: replay its answer.
            row = await conn.fetchrow(self.sql["idempotency_answer"], key[0])
            if row is None or row["body_hash"] != key[1]:
                raise Rollback(KeyMismatch())
            raise Rollback(Replayed(json.loads(row["answer"])))
        try:
            rows = await conn.fetch(self.sql["enqueue"], *args)
        except asyncpg.PostgresError as exc:
            # A concurrent enqueue or retry gave one of the submissions a live row
            # after this statement's snapshot (see the enqueue query).
            if _takes_a_live_row(exc):
                raise Rollback(_LostRace()) from None
            raise
        unknown = [SubmissionId(r["value"]) for r in rows if r["kind"] == "unknown"]
        if unknown:
            # Nothing was enqueued; the key stays free for a corrected request.
            raise Rollback(UnknownIds(unknown))
        outcome = Enqueued(
            queue_ids=[QueueId(r["value"]) for r in rows if r["kind"] == "queued"],
            already_marked=sum(r["kind"] == "marked" for r in rows),
        )
        if batch is not None and outcome.queue_ids:
            await conn.execute(self.sql["batch_lane_rows"], outcome.queue_ids, *batch)
        if key is not None:
            answer = json.dumps(outcome.answer(requested))
            await conn.execute(self.sql["idempotency_save"], key[0], answer)
        return outcome

    async def dry_run(self, submission_ids: Sequence[UUID | str], assignment_id: str, *,
                      group: str, remark: bool, pool: str, money: Money) -> DryRun:
        """What an enqueue would add and use; writes nothing (CONTRACT §9c)."""
        row = await self._fetchrow("dry_run", list(submission_ids), assignment_id, remark,
                                   group, pool, money.json())
        assert row is not None, "an aggregate always answers one row"
        return DryRun.from_row(row)

    async def _retry(self, name: str, *args: Any) -> Any:
        """A manual retry (failed -> pending): 409 if the submission has a live row meanwhile."""
        async def work(conn: asyncpg.Connection) -> list[asyncpg.Record] | None:
            try:
                rows: list[asyncpg.Record] = await conn.fetch(self.sql[name], *args)
            except asyncpg.UniqueViolationError as exc:
                if exc.constraint_name != _LIVE_ROW_INDEX:
                    raise
                raise Rollback(None) from None
            return rows
        rows = await self.db.write(work, page=True)
        if rows is None:
            raise Conflict("the submission already has a live queue row")
        return rows[0][0] if rows else None

    # `plan` (the pools and kinds, aiqueue/config.py QueueConfig.plan): None means
    # the default pool with the cap and budget passed, and the one kind `mark`.

    async def claim(self, cap: int, breaker_threshold: int,
                    budget: Budget = NO_BUDGET, plan: str | None = None,
                    money: Money = NO_MONEY) -> Job | None:
        rows = await self._write("claim", cap, breaker_threshold, *budget.args(), plan,
                                 money.json())
        return Job.from_row(rows[0]) if rows else None

    async def can_claim(self, cap: int, breaker_threshold: int, plan: str | None = None) -> bool:
        return bool(await self._fetchval("can_claim", cap, breaker_threshold, plan))

    async def dispatch_accepted(self, pool: str = "default") -> None:
        await self._write_one("dispatch_accepted", pool)

    async def refused(self, queue_id: UUID, dispatch_seq: int, *, kind: str, delay: float,
                      give_up: float, cap: int, plan: str | None = None) -> Status | None:
        """A refusal of the current dispatch (CONTRACT §8a); the row's new status, or None.

        `kind` is the refusal's (rate_limited, overloaded); only the row's pool is held.
        """
        # Only the current dispatch can be refused, so a repeat changes nothing.
        status: Status | None = await self._write_val(
            "flow_refused", queue_id, dispatch_seq, kind, delay, give_up, cap, plan,
            idempotent=True)
        return status

    async def attempt_failed(
        self,
        queue_id: UUID,
        dispatch_seq: int,
        *,
        delay: float,
        retryable: bool,
        max_attempts: int,
        error: str,
        outcome: str,
        attempts: str | None = None,
    ) -> Status | None:
        """Fail the current dispatch; the row's new status, or None if it was stale.

        `attempts`: the kinds' own max attempts ({kind: n} as JSON; QueueConfig.attempts).
        """
        # Only the row's current dispatch can fail it, so a repeat changes nothing.
        status: Status | None = await self._write_val(
            "attempt_failed", queue_id, dispatch_seq, delay, retryable, max_attempts, error,
            outcome, attempts or "{}", idempotent=True,
        )
        return status

    async def take_handoff(self, queue_id: UUID, dispatch_seq: int) -> bool:
        """Take a row a settle claimed, to send it: False when another taker had it."""
        # One statement on the hot path.  Its retry after a lost answer reads as
        # taken: the row then waits for recovery rather than risk two dispatches.
        rows = await self._write_one("take_handoff", queue_id, dispatch_seq)
        return bool(rows and rows[0][0])

    async def set_dispatch_ref(self, queue_id: UUID, dispatch_seq: int, ref: str) -> None:
        # Idempotent: the same id written again changes nothing.
        await self._write_one("set_dispatch_ref", queue_id, dispatch_seq, ref)

    async def breaker_failure(self, threshold: int, cooldown: float,
                              pool: str = "default") -> int:
        rows = await self._write("breaker_failure", threshold, cooldown, pool)
        return int(rows[0]["consecutive_failures"]) if rows else 0

    async def complete(
        self, queue_id: UUID, dispatch_seq: int, result: dict[str, Any], usage: Any,
        cap: int = 0, budget: Budget = NO_BUDGET, plan: str | None = None,
        money: Money = NO_MONEY,
    ) -> bool:
        """Apply a result at most once; it raises L (up to `cap`) and corrects the budget
        and the dispatch's charge (turns by tokens, spend)."""
        usage_json = json.dumps(usage) if usage is not None else None
        rows = await self._write_one("complete", queue_id, json.dumps(result), usage_json,
                                     dispatch_seq, cap, budget.declared or _budgeted(plan),
                                     plan, money.json())
        return bool(rows and rows[0][0])

    async def settle(
        self, queue_id: UUID, dispatch_seq: int, result: dict[str, Any], usage: Any, cap: int,
        breaker_threshold: int, budget: Budget = NO_BUDGET, plan: str | None = None,
        money: Money = NO_MONEY,
    ) -> tuple[bool, Job | None]:
        """complete, then claim: whether the result was applied, and the job claimed next."""
        usage_json = json.dumps(usage) if usage is not None else None
        # A repeat applies nothing twice (the status check) and claims under the cap.
        rows = await self._write_one("settle", queue_id, json.dumps(result), usage_json,
                                     dispatch_seq, cap, breaker_threshold, *budget.args(),
                                     plan, money.json())
        row = rows[0]  # aiqueue_settle always answers one row
        return bool(row["applied"]), Job.from_row(row) if row["queue_id"] else None

    async def heartbeat(self, queue_id: UUID, dispatch_seq: int, progress: Any) -> bool:
        rows = await self._write_one("heartbeat", queue_id, dispatch_seq, json.dumps(progress))
        return bool(rows)

    async def prune(self, older_than_seconds: float) -> int:
        return int(await self._write_val("prune", older_than_seconds, idempotent=True))

    async def next_wakeup(self, cap: int, threshold: int, stuck_after: float, *,
                          heartbeat: float | None = None, bound: float | None = None,
                          ask: bool = False, look: float | None = None,
                          budget: Budget = NO_BUDGET,
                          plan: str | None = None) -> float | None:
        """Seconds until the step has work; `look`: how long a dispatch the platform
        is asked about stays quiet before the look (default: the heartbeat timeout)."""
        heartbeat = stuck_after if heartbeat is None else heartbeat
        look = min(stuck_after, heartbeat) if look is None else look
        value = await self._fetchval("next_wakeup", cap, threshold, stuck_after, heartbeat,
                                     bound, ask, *budget.args(), plan, look)
        return None if value is None else float(value)

    # -- operator actions -------------------------------------------------

    async def row_status(self, queue_id: UUID) -> Status | None:
        status: Status | None = await self._fetchval("row_status", queue_id)
        return status

    async def retry_failed(self, queue_id: UUID, actor: str) -> bool:
        return await self._retry("retry_failed", queue_id, actor) is not None

    async def retry_all_failed(self, assignment_id: str | None, actor: str) -> int:
        return int(await self._retry("retry_all_failed", assignment_id, actor))

    async def cancel_row(self, queue_id: UUID, actor: str) -> bool:
        return int(await self._write_val("cancel_pending", queue_id, None, actor, page=True)) == 1

    async def cancel_assignment(self, assignment_id: str, actor: str) -> int:
        return int(await self._write_val("cancel_pending", None, assignment_id, actor, page=True))

    async def set_paused(self, paused: bool, actor: str) -> None:
        await self._write("set_paused", paused, actor, page=True, idempotent=True)

    # -- reading ----------------------------------------------------------

    async def control(self, threshold: int, pool: str | None = None) -> Control:
        """The pause, and the breaker and hold of `pool` (None: the default pool)."""
        row = await self._fetchrow("control", threshold, pool)
        assert row is not None, "migration inserts the control row"
        return Control.from_row(row)

    async def flow_state(self, cap: int, window_seconds: float,
                         pool: str | None = None) -> FlowState:
        """L, the hold, the refusal counters and the budget window's use (CONTRACT §8a).

        Of one pool (None: the default pool): `cap` is that pool's max_in_flight.
        """
        row = await self._fetchrow("flow_state", cap, window_seconds, pool)
        assert row is not None, "migration inserts the control row"
        return FlowState.from_row(row)

    async def pool_states(self, plan: str, threshold: int,
                          window_seconds: float) -> list[PoolState]:
        """Each pool's L, hold, breaker, refusals, window use and slots (CONTRACT §9b)."""
        rows = await self._fetch("pool_states", plan, threshold, window_seconds)
        return [PoolState.from_row(r) for r in rows]

    async def kind_counts(self) -> list[KindCount]:
        """Rows per kind, pool and status (from the count deltas)."""
        return [KindCount.from_row(r) for r in await self._fetch("kind_counts")]

    async def stats(self, at: datetime | None = None) -> Stats:
        """The headline figures as of `at` (None: the database's now())."""
        async def work(conn: asyncpg.Connection) -> asyncpg.Record | None:
            await conn.execute(self.sql["serial_plans"])
            row: asyncpg.Record | None = await conn.fetchrow(self.sql["stats"], at)
            return row
        # A transaction for SET LOCAL; it writes nothing, so a repeat is harmless.
        row = await self.db.write(work, page=True, idempotent=True)
        assert row is not None
        return Stats.from_row(row)

    async def list_rows(
        self,
        *,
        status: Status | None,
        assignment_id: str | None,
        limit: int,
        offset: int = 0,
        after: tuple[Any, UUID] | None = None,
        group: str | None = None,
        kind: str | None = None,
    ) -> list[QueueRow]:
        after_at, after_id = after if after else (None, None)
        rows = await self._fetch(
            "list_rows", status, assignment_id, after_at, after_id, limit, offset, group, kind,
            page=True,
        )
        return [QueueRow.from_row(r) for r in rows]

    async def count_rows(self, *, status: Status | None, assignment_id: str | None,
                         group: str | None = None, kind: str | None = None) -> int:
        return int(await self._fetchval("count_rows", status, assignment_id, group, kind,
                                        page=True))

    async def get_row(self, queue_id: UUID) -> QueueRow | None:
        row = await self._fetchrow("get_row", queue_id, page=True)
        return QueueRow.from_row(row) if row else None

    async def attempts_of(self, queue_id: UUID) -> list[Attempt]:
        return [Attempt.from_row(r) for r in await self._fetch("attempts_of", queue_id, page=True)]

    # -- the monitoring page (sql/monitor.sql) ------------------------------

    async def throughput(
        self, window_seconds: float, bucket_seconds: float
    ) -> list[tuple[datetime, int, int]]:
        """(bucket start, completed, failed) for every bucket of the window, oldest first."""
        rows = await self._fetch("monitor_throughput", window_seconds, bucket_seconds,
                                page=True)
        return [(r["bucket"], int(r["completed"]), int(r["failed"])) for r in rows]

    async def list_rows_newer(
        self,
        *,
        status: Status | None,
        assignment_id: str | None,
        before: tuple[datetime, UUID],
        limit: int,
        group: str | None = None,
        kind: str | None = None,
    ) -> list[QueueRow]:
        """Up to `limit` rows newer than the cursor, nearest it first."""
        rows = await self._fetch(
            "monitor_rows_newer", status, assignment_id, before[0], before[1], limit, group,
            kind, page=True,
        )
        return [QueueRow.from_row(r) for r in rows]

    async def assignment_ids(self, limit: int) -> list[str]:
        """Distinct assignment ids in the queue, alphabetically, at most `limit`."""
        rows = await self._fetch("monitor_assignments", limit, page=True)
        return [r["assignment_id"] for r in rows]

    # == live events, queue position, the teacher page (sql/live.sql, sql/results.sql) ==

    async def events_head(self) -> EventCursor:
        """Where a new live-events subscriber starts reading."""
        return EventCursor(int(await self._fetchval("live_events_head")), 0)

    async def events_after(
        self, assignment_id: str, cursor: EventCursor, limit: int
    ) -> EventBatch:
        """The assignment's events past `cursor` whose transactions have all ended."""
        rows = await self._fetch(
            "live_events_after", assignment_id, str(cursor.tx), cursor.id, cursor.k, limit
        )
        # Rows come in (tx, id) order, so the final ones are a prefix.
        ready = [MarkingEvent.from_row(r) for r in rows if r["final"]]
        return EventBatch(ready, held_back=len(ready) < len(rows), full=len(rows) == limit)

    async def submission_status(self, submission_id: UUID) -> SubmissionStatus | None:
        row = await self._fetchrow("live_submission_status", submission_id)
        return SubmissionStatus.from_row(row) if row else None

    async def recent_processing_seconds(self) -> float | None:
        value = await self._fetchval("live_recent_seconds")
        return None if value is None else float(value)

    async def run_progress(self, assignment_id: str) -> RunProgress:
        row = await self._fetchrow("live_assignment_progress", assignment_id)
        assert row is not None, "an aggregate always answers one row"
        return RunProgress.from_row(row)

    async def assignment_info(self, assignment_id: str) -> AssignmentInfo | None:
        row = await self._fetchrow("results_assignment", assignment_id)
        return AssignmentInfo.from_row(row) if row else None

    async def save_assignment(
        self, assignment_id: str, title: str, payload: dict[str, Any]
    ) -> None:
        await self._write("results_upsert_assignment", assignment_id, title, json.dumps(payload),
                          page=True, idempotent=True)

    async def submission_results(self, assignment_id: str, limit: int) -> list[SubmissionResult]:
        rows = await self._fetch("results_submissions", assignment_id, limit, None, page=True)
        return [SubmissionResult.from_row(r) for r in rows]

    async def submission_result(
        self, submission_id: UUID, assignment_id: str
    ) -> SubmissionResult | None:
        row = await self._fetchrow("results_submissions", assignment_id, 1, submission_id)
        return SubmissionResult.from_row(row) if row else None

    async def unmarked_submissions(self, assignment_id: str, limit: int) -> list[SubmissionId]:
        rows = await self._fetch("results_unmarked", assignment_id, limit)
        return [SubmissionId(r["id"]) for r in rows]

    async def seed_submissions(self, submissions: Sequence[dict[str, Any]]) -> int:
        """Insert submissions that are not there yet; how many were new."""
        rows = await self._write("results_seed_submissions", json.dumps(list(submissions)),
                                 page=True)
        return len(rows)
