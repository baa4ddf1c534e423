"""The enqueue's statements of sql/enqueue.sql: its transaction (`enqueue`, `idempotency_*`),
rerun on a lost race, and the dry run."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from aiqueue.answers import AnswerKey
from aiqueue.db.calls import Database, Rollback
from aiqueue.db.gateway import Gateway
from aiqueue.errors import Conflict
from aiqueue.models import (
    DryRun,
    Enqueued,
    EnqueueOutcome,
    KeyMismatch,
    QueueId,
    Replayed,
    SubmissionId,
    UnknownIds,
)
from aiqueue.models.calibration import GateAsked, spread_sample
from aiqueue.settings.money import Money

# How often an enqueue runs when it keeps losing a race for a live row.
_ENQUEUE_RUNS = 5
# The partial unique index that allows one live (pending/processing) row per submission:
# each month of the record has its own, named after it with the month (aiqueue 0078).
LIVE_ROW_INDEX = "ai_marking_queue_active_uniq"


def live_row_taken(exc: BaseException) -> bool:
    """Whether `exc` is another transaction's live row of the same submission and payload."""
    return (isinstance(exc, asyncpg.UniqueViolationError)
            and (exc.constraint_name or "").startswith(LIVE_ROW_INDEX))


class LostRace:
    """A run of the enqueue that rolled back: another transaction took a live row first."""


def _takes_a_live_row(exc: asyncpg.PostgresError) -> bool:
    """Did a statement fail because another transaction gave a submission a live row?"""
    if isinstance(exc, asyncpg.DeadlockDetectedError):
        # Two overlapping batches waiting on each other's index entries.
        return True
    return live_row_taken(exc)


async def enqueue_rows(db: Database, sql: dict[str, str], args: tuple[Any, ...],
                       key: tuple[str, str] | None, requested: int,
                       batch: tuple[datetime, datetime] | None,
                       gate: GateAsked | None = None) -> EnqueueOutcome:
    """Run the enqueue's transaction until it does not lose a race (409 after a few)."""
    for _ in range(_ENQUEUE_RUNS):
        # Idempotent by design: a repeat skips what the first run inserted,
        # and a key's repeat replays the answer the first run saved.
        outcome = await db.write(
            lambda conn: enqueue_in(conn, sql, args, key, requested, batch, gate),
            idempotent=True)
        if not isinstance(outcome, LostRace):
            return outcome
        # The run rolled back; the next one skips the submission that got a live row.
    raise Conflict("the submissions' live rows kept changing; try again")


async def enqueue_in(conn: asyncpg.Connection, sql: dict[str, str], args: tuple[Any, ...],
                      key: tuple[str, str] | None, requested: int,
                      batch: tuple[datetime, datetime] | None,
                      gate: GateAsked | None) -> EnqueueOutcome | LostRace:
    """The enqueue's transaction (db.write runs it; Rollback undoes it)."""
    if key is not None and not await conn.fetchval(sql["idempotency_claim"], *key):
        # The key's first request committed: replay its answer.
        row = await conn.fetchrow(sql["idempotency_answer"], key[0])
        if row is None or row["body_hash"] != key[1]:
            raise Rollback(KeyMismatch())
        raise Rollback(Replayed(json.loads(row["answer"])))
    try:
        rows = await conn.fetch(sql["enqueue"], *args)
    except asyncpg.PostgresError as exc:
        # A concurrent enqueue or retry gave one of the submissions a live row
        # after this statement's snapshot (see the enqueue query).
        if _takes_a_live_row(exc):
            raise Rollback(LostRace()) from None
        raise
    unknown = [SubmissionId(r["value"]) for r in rows if r["kind"] == "unknown"]
    if unknown:
        # Nothing was enqueued; the key stays free for a corrected request.
        raise Rollback(UnknownIds(unknown))
    outcome = Enqueued(
        queue_ids=[QueueId(r["value"]) for r in rows if r["kind"] == "queued"],
        already_marked=sum(r["kind"] == "marked" for r in rows),
        same_answers=sum(r["copies"] for r in rows),
        run_id=next((r["value"] for r in rows if r["kind"] == "run"), None),
    )
    if gate is None and outcome.run_id is not None and outcome.queue_ids \
            and await conn.fetchval(sql["calibration_run_holds"], outcome.run_id):
        # Rows joining a run that still holds its rest for a check wait with them.
        gate = GateAsked(rows=0)
    first: list[QueueId] = []
    rest = outcome.queue_ids
    if gate is not None and outcome.run_id is not None:
        # A row that copies another's mark is never a check: it waits for its leader.
        leaders = [QueueId(r["value"]) for r in rows if r["kind"] == "queued" and not r["copies"]]
        first = await _calibration_rows(conn, sql, outcome, leaders, gate)
        chosen = set(first)
        rest = [q for q in outcome.queue_ids if q not in chosen]
    if batch is not None and rest:
        # Calibration rows stay live: the teacher is waiting to check them.
        await conn.execute(sql["batch_lane_rows"], rest, *batch)
    if gate is not None and outcome.run_id is not None:
        await conn.execute(sql["calibration_hold"], outcome.run_id, args[1], first, rest,
                           gate.count, gate.release_when)
    if key is not None:
        answer = json.dumps(outcome.answer(requested))
        await conn.execute(sql["idempotency_save"], key[0], answer)
    return outcome


async def _calibration_rows(conn: asyncpg.Connection, sql: dict[str, str], outcome: Enqueued,
                            leaders: list[QueueId], gate: GateAsked) -> list[QueueId]:
    """The new rows marked first: a spread sample fixed by the run's id, or those named
    (of the rows that will be marked themselves, `leaders`)."""
    assert outcome.run_id is not None
    if gate.rows is not None:
        return spread_sample(outcome.run_id, leaders, gate.rows)
    rows = await conn.fetch(sql["calibration_rows_named"], leaders, list(gate.submission_ids))
    return [QueueId(r["queue_id"]) for r in rows]


class EnqueueQueries(Gateway):
    """The enqueue and its dry run: one method per named query of sql/enqueue.sql."""

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
        answer_key: AnswerKey | None = None,
        gate: GateAsked | None = None,
    ) -> EnqueueOutcome:
        """Enqueue atomically; with `key` (Idempotency-Key, body hash) at most once per key.

        `payload` is the JSON text the request's parser made (or an object, serialised here).
        `kind` and its `pool` are stored on every row (docs/concepts.md).
        `not_before` / `expires_at`: when the rows become due, and when they expire.
        `batch` (deadline, live time) puts the new rows on the overnight lane in the
        same transaction, so no live claim can take them first.
        `answer_key` groups the same answers (docs/same-answer.md); None marks each on its own.
        `gate` (docs/agreement.md): the rows marked first, the rest held in the same transaction.
        """
        text = payload if isinstance(payload, str) else json.dumps(payload)
        args = (list(submission_ids), assignment_id, priority, text, group or assignment_id,
                remark, kind, pool, not_before, expires_at,
                answer_key and answer_key.inner_pad, answer_key and answer_key.outer_pad,
                bool(answer_key and answer_key.loose), "live" if batch is None else "batch")
        return await enqueue_rows(self.db, self.sql, args, key, len(submission_ids), batch,
                                  gate)

    async def dry_run(self, submission_ids: Sequence[UUID | str], assignment_id: str, *,
                      group: str, remark: bool, pool: str, money: Money, kind: str = "mark",
                      payload: str = "{}", answer_key: AnswerKey | None = None,
                      lane: str = "live") -> DryRun:
        """What an enqueue would add and use; writes nothing (docs/concepts.md).

        With `answer_key`, rows that would copy a mark of the same answer are counted
        apart (docs/same-answer.md).
        """
        row = await self._fetchrow("dry_run", list(submission_ids), assignment_id, remark,
                                   group, pool, money.json(),
                                   answer_key and answer_key.inner_pad,
                                   answer_key and answer_key.outer_pad, kind, payload,
                                   bool(answer_key and answer_key.loose), lane)
        assert row is not None, "an aggregate always answers one row"
        return DryRun.from_row(row)
