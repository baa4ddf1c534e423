"""The queue's PostgreSQL gateway: one method per named query (LISTEN: listener.py)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any, TypeVar
from uuid import UUID

import asyncpg

from aiqueue.errors import Conflict, StoreError
from aiqueue.models import (
    AppliedResult,
    AssignmentInfo,
    Attempt,
    Control,
    EnqueueOutcome,
    EventBatch,
    EventCursor,
    Job,
    MarkingEvent,
    QueueId,
    QueueRow,
    ReviewOutcome,
    RunProgress,
    Stats,
    Status,
    SubmissionId,
    SubmissionResult,
    SubmissionStatus,
    TallyRow,
    UsageRow,
)

T = TypeVar("T")
_HEADER = re.compile(r"^-- ([a-z_]+) --$", re.MULTILINE)


@cache
def queries() -> dict[str, str]:
    """Split every sql/*.sql file (queries.sql first) into {name: statement}."""
    found: dict[str, str] = {}
    files = sorted(
        (f for f in resources.files("aiqueue.db.sql").iterdir() if f.name.endswith(".sql")),
        key=lambda f: (f.name != "queries.sql", f.name),
    )
    for file in files:
        parts = _HEADER.split(file.read_text())[1:]
        for name, body in zip(parts[::2], parts[1::2], strict=True):
            if name in found:
                raise RuntimeError(f"query {name!r} is defined twice")
            found[name] = body.strip()
    return found


async def connect_pool(dsn: str, *, max_size: int = 10) -> asyncpg.Pool:
    """A small pool that also works through a transaction-mode pooler."""
    try:
        pool = await asyncpg.create_pool(
            dsn,
            min_size=1,
            max_size=max_size,
            # No prepared-statement cache and no session state: PgBouncer/Supavisor
            # in transaction mode may hand each transaction a different backend.
            statement_cache_size=0,
            max_inactive_connection_lifetime=60,
            command_timeout=30,
            # aiqueue leaves no session state behind (no SET, LISTEN, cursors or
            # session locks), so the default reset round trip on every release
            # would only cost time — and through a pooler hit a random backend.
            reset=_no_reset,
        )
    except (OSError, asyncpg.PostgresError) as exc:
        raise StoreError(f"cannot connect to the database: {type(exc).__name__}") from exc
    assert pool is not None
    return pool


async def _no_reset(conn: asyncpg.Connection) -> None:
    return None


def wrap_error(exc: Exception) -> StoreError:
    """A database failure as a StoreError naming only the exception's type."""
    return StoreError(f"database error: {type(exc).__name__}")


class Store:
    """Queue persistence on an asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.sql = queries()

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.Connection]:
        try:
            async with self.pool.acquire() as conn:
                yield conn
        except asyncpg.UniqueViolationError as exc:
            raise Conflict("the submission already has a live queue row") from exc
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise wrap_error(exc) from exc

    async def _fetch(self, name: str, *args: Any) -> list[asyncpg.Record]:
        async with self._conn() as conn:
            rows: list[asyncpg.Record] = await conn.fetch(self.sql[name], *args)
            return rows

    async def _fetchrow(self, name: str, *args: Any) -> asyncpg.Record | None:
        async with self._conn() as conn:
            row: asyncpg.Record | None = await conn.fetchrow(self.sql[name], *args)
            return row

    async def _fetchval(self, name: str, *args: Any) -> Any:
        async with self._conn() as conn:
            return await conn.fetchval(self.sql[name], *args)

    async def close(self) -> None:
        await self.pool.close()

    async def ping(self) -> bool:
        return bool(await self._fetchval("ping"))

    # -- the loop ---------------------------------------------------------

    async def enqueue(
        self,
        submission_ids: Sequence[UUID],
        assignment_id: str,
        priority: int,
        payload: dict[str, Any],
    ) -> EnqueueOutcome:
        args = (list(submission_ids), assignment_id, priority, json.dumps(payload))
        for attempt in range(3):
            try:
                rows = await self._fetch("enqueue", *args)
                break
            except StoreError as exc:
                # Two overlapping batches can deadlock on the unique index; the
                # loser's whole statement rolled back, so running it again is safe.
                if attempt == 2 or not isinstance(exc.__cause__, asyncpg.DeadlockDetectedError):
                    raise
        return EnqueueOutcome(
            queue_ids=[QueueId(r["value"]) for r in rows if r["kind"] == "queued"],
            unknown_ids=[SubmissionId(r["value"]) for r in rows if r["kind"] == "unknown"],
        )

    async def claim(self, cap: int, breaker_threshold: int) -> Job | None:
        row = await self._fetchrow("claim", cap, breaker_threshold)
        return Job.from_row(row) if row else None

    async def can_claim(self, cap: int, breaker_threshold: int) -> bool:
        return bool(await self._fetchval("can_claim", cap, breaker_threshold))

    async def dispatch_accepted(self) -> None:
        async with self._conn() as conn:
            await conn.execute(self.sql["dispatch_accepted"])

    async def dispatch_busy(self, queue_id: UUID, dispatch_seq: int, delay: float) -> bool:
        return bool(await self._fetchval("dispatch_busy", queue_id, dispatch_seq, delay))

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
    ) -> Status | None:
        """Fail the current dispatch; the row's new status, or None if it was stale."""
        status: Status | None = await self._fetchval(
            "attempt_failed", queue_id, dispatch_seq, delay, retryable, max_attempts, error,
            outcome,
        )
        return status

    async def breaker_failure(self, threshold: int, cooldown: float) -> int:
        row = await self._fetchrow("breaker_failure", threshold, cooldown)
        return int(row["consecutive_failures"]) if row else 0

    async def complete(
        self, queue_id: UUID, dispatch_seq: int, result: dict[str, Any], usage: Any
    ) -> bool:
        usage_json = json.dumps(usage) if usage is not None else None
        n = await self._fetchval("complete", queue_id, json.dumps(result), usage_json, dispatch_seq)
        return bool(n)

    async def settle(
        self, queue_id: UUID, dispatch_seq: int, result: dict[str, Any], usage: Any, cap: int,
        breaker_threshold: int,
    ) -> tuple[bool, Job | None]:
        """complete, then claim: whether the result was applied, and the job claimed next."""
        usage_json = json.dumps(usage) if usage is not None else None
        row = await self._fetchrow("settle", queue_id, json.dumps(result), usage_json,
                                   dispatch_seq, cap, breaker_threshold)
        assert row is not None  # aiqueue_settle always answers one row
        return bool(row["applied"]), Job.from_row(row) if row["queue_id"] else None

    async def heartbeat(self, queue_id: UUID, dispatch_seq: int, progress: Any) -> bool:
        row = await self._fetchrow("heartbeat", queue_id, dispatch_seq, json.dumps(progress))
        return row is not None

    async def recover_stuck(self, stuck_after: float, max_attempts: int) -> int:
        return int(await self._fetchval("recover_stuck", stuck_after, max_attempts))

    async def prune(self, older_than_seconds: float) -> int:
        return int(await self._fetchval("prune", older_than_seconds))

    async def next_wakeup(self, cap: int, threshold: int, stuck_after: float) -> float | None:
        value = await self._fetchval("next_wakeup", cap, threshold, stuck_after)
        return None if value is None else float(value)

    # -- operator actions -------------------------------------------------

    async def row_status(self, queue_id: UUID) -> Status | None:
        status: Status | None = await self._fetchval("row_status", queue_id)
        return status

    async def retry_failed(self, queue_id: UUID, actor: str) -> bool:
        return await self._fetchval("retry_failed", queue_id, actor) is not None

    async def retry_all_failed(self, assignment_id: str | None, actor: str) -> int:
        return int(await self._fetchval("retry_all_failed", assignment_id, actor))

    async def cancel_row(self, queue_id: UUID, actor: str) -> bool:
        return int(await self._fetchval("cancel_pending", queue_id, None, actor)) == 1

    async def cancel_assignment(self, assignment_id: str, actor: str) -> int:
        return int(await self._fetchval("cancel_pending", None, assignment_id, actor))

    async def set_paused(self, paused: bool, actor: str) -> None:
        async with self._conn() as conn:
            await conn.execute(self.sql["set_paused"], paused, actor)

    # -- reading ----------------------------------------------------------

    async def control(self, threshold: int) -> Control:
        row = await self._fetchrow("control", threshold)
        assert row is not None, "migration inserts the control row"
        return Control.from_row(row)

    async def stats(self) -> Stats:
        async with self._conn() as conn, conn.transaction():
            await conn.execute(self.sql["serial_plans"])
            row = await conn.fetchrow(self.sql["stats"])
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
    ) -> list[QueueRow]:
        after_at, after_id = after if after else (None, None)
        rows = await self._fetch(
            "list_rows", status, assignment_id, after_at, after_id, limit, offset
        )
        return [QueueRow.from_row(r) for r in rows]

    async def count_rows(self, *, status: Status | None, assignment_id: str | None) -> int:
        return int(await self._fetchval("count_rows", status, assignment_id))

    async def get_row(self, queue_id: UUID) -> QueueRow | None:
        row = await self._fetchrow("get_row", queue_id)
        return QueueRow.from_row(row) if row else None

    async def attempts_of(self, queue_id: UUID) -> list[Attempt]:
        return [Attempt.from_row(r) for r in await self._fetch("attempts_of", queue_id)]

    # -- the monitoring page (sql/monitor.sql) ------------------------------

    async def throughput(
        self, window_seconds: float, bucket_seconds: float
    ) -> list[tuple[datetime, int, int]]:
        """(bucket start, completed, failed) for every bucket of the window, oldest first."""
        rows = await self._fetch("monitor_throughput", window_seconds, bucket_seconds)
        return [(r["bucket"], int(r["completed"]), int(r["failed"])) for r in rows]

    async def list_rows_newer(
        self,
        *,
        status: Status | None,
        assignment_id: str | None,
        before: tuple[datetime, UUID],
        limit: int,
    ) -> list[QueueRow]:
        """Up to `limit` rows newer than the cursor, nearest it first."""
        rows = await self._fetch(
            "monitor_rows_newer", status, assignment_id, before[0], before[1], limit
        )
        return [QueueRow.from_row(r) for r in rows]

    async def assignment_ids(self, limit: int) -> list[str]:
        """Distinct assignment ids in the queue, alphabetically, at most `limit`."""
        return [r["assignment_id"] for r in await self._fetch("monitor_assignments", limit)]

    # == live events, queue position, the teacher page (sql/live.sql, sql/results.sql) ==

    async def events_head(self) -> EventCursor:
        """Where a new live-events subscriber starts reading."""
        return EventCursor(int(await self._fetchval("live_events_head")), 0)

    async def events_after(
        self, assignment_id: str, cursor: EventCursor, limit: int
    ) -> EventBatch:
        """The assignment's events past `cursor` whose transactions have all ended."""
        rows = await self._fetch(
            "live_events_after", assignment_id, str(cursor.tx), cursor.id, limit
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
        async with self._conn() as conn:
            await conn.execute(
                self.sql["results_upsert_assignment"], assignment_id, title, json.dumps(payload)
            )

    async def submission_results(self, assignment_id: str, limit: int) -> list[SubmissionResult]:
        rows = await self._fetch("results_submissions", assignment_id, limit, None)
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
        rows = await self._fetch("results_seed_submissions", json.dumps(list(submissions)))
        return len(rows)

    # == review, usage and counters (sql/review.sql) ==

    async def accept(self, queue_id: UUID, actor: str | None,
                     adjusted: dict[str, Any] | None) -> ReviewOutcome:
        adjusted_json = json.dumps(adjusted) if adjusted is not None else None
        row = await self._fetchrow("review_accept", queue_id, actor, adjusted_json)
        assert row is not None  # the function always answers one row
        return ReviewOutcome.from_row(row)

    async def revert(self, queue_id: UUID, actor: str | None) -> ReviewOutcome:
        row = await self._fetchrow("review_revert", queue_id, actor)
        assert row is not None
        return ReviewOutcome.from_row(row)

    async def review_run(self, assignment_id: str, action: str,
                         actor: str | None) -> tuple[int, int]:
        """(done, superseded) over the assignment's latest run's unreviewed results."""
        row = await self._fetchrow("review_run", assignment_id, action, actor)
        assert row is not None
        return int(row["done"]), int(row["superseded"])

    async def result_history(self, submission_id: UUID, limit: int) -> list[AppliedResult]:
        rows = await self._fetch("review_history", submission_id, limit)
        return [AppliedResult.from_row(r) for r in rows]

    async def review_of(self, queue_id: UUID) -> dict[str, Any] | None:
        """The review fields of a row's applied result (no result), or None."""
        row = await self._fetchrow("review_of_row", queue_id)
        return dict(row) if row else None

    async def submission_exists(self, submission_id: UUID) -> bool:
        return bool(await self._fetchval("review_submission_exists", submission_id))

    async def usage(self, since: datetime, until: datetime, by: str) -> list[UsageRow]:
        """One row per key, then the total (key None)."""
        return [UsageRow.from_row(r) for r in await self._fetch("usage_report", since, until, by)]

    async def counters(self) -> list[TallyRow]:
        return [TallyRow.from_row(r) for r in await self._fetch("metrics_counters")]

    async def buckets(self) -> list[float]:
        return [float(r["le"]) for r in await self._fetch("metrics_buckets")]
