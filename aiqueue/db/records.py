"""A school's data: one method per named query of sql/records.sql (erasure: erasure.py)."""

from __future__ import annotations

import json
from datetime import datetime

import asyncpg

from aiqueue.db.calls import Rollback
from aiqueue.db.enqueue import live_row_taken
from aiqueue.db.gateway import Gateway
from aiqueue.errors import Conflict
from aiqueue.models import KeyMismatch, Replayed
from aiqueue.models.records import ExportLine, Partitioned, ReplayFilter, ReplayOutcome, Retained


class _LostRace:
    """The replay rolled back: an enqueue gave a matching submission a live row first."""


class RecordsQueries(Gateway):
    """Retention, the export's pages and replay by filter."""

    async def retain(self, ended_seconds: float, history_seconds: float, *,
                     completed_seconds: float | None = None, batch: int = 5000,
                     every_seconds: float = 60.0) -> Retained:
        """One bounded retention pass, unless one ran in the last `every_seconds`.

        Each pass deletes at most `batch` rows of each kind (ended rows, results,
        attempts), so it holds its locks for a moment; a backlog clears over minutes.
        First the month partitions (`keep_partitions`): whole months past their
        period are dropped, so the rows deleted one by one are the boundary month's;
        the record's months too when `completed_seconds` (the prune's period) is given.
        """
        await self.keep_partitions(history_seconds, every_seconds,
                                   completed_seconds=completed_seconds,
                                   ended_seconds=None if completed_seconds is None
                                   else ended_seconds)
        if not await self._fetchval("retain_due", every_seconds):
            return Retained(False, 0, 0, 0)
        rows = await self._write("retain", ended_seconds, history_seconds, batch,
                                 every_seconds, idempotent=True)
        return Retained.from_row(rows[0])

    async def keep_partitions(self, history_seconds: float, every_seconds: float = 60.0, *,
                              completed_seconds: float | None = None,
                              ended_seconds: float | None = None) -> Partitioned:
        """Create the coming months' partitions and drop whole months past their period,
        unless that ran in the last `every_seconds` (DDL: a statement of its own). The
        record's months go when every row of one is past its period (`completed_seconds`
        for completed rows, `ended_seconds` for the others; None keeps them)."""
        rows = await self._write("keep_partitions", history_seconds, every_seconds,
                                 completed_seconds, ended_seconds, idempotent=True)
        return Partitioned(int(rows[0]["created"]), int(rows[0]["dropped"]))

    async def export_attempts(self, since: datetime, until: datetime, after: int,
                              limit: int) -> list[ExportLine]:
        rows = await self._fetch("export_attempts", since, until, after, limit, page=True)
        return [ExportLine.attempt(r) for r in rows]

    async def export_results(self, since: datetime, until: datetime, after: int, limit: int,
                             feedback: bool) -> list[ExportLine]:
        rows = await self._fetch("export_results", since, until, after, limit, feedback,
                                 page=True)
        return [ExportLine.result(r) for r in rows]

    async def replay(self, where: ReplayFilter, *, dry_run: bool, actor: str,
                     key: tuple[str, str] | None = None
                     ) -> ReplayOutcome | Replayed | KeyMismatch:
        """Replay by filter in one statement; with `key` at most once per Idempotency-Key."""
        async def work(conn: asyncpg.Connection
                       ) -> ReplayOutcome | Replayed | KeyMismatch | _LostRace:
            if key is not None and not await conn.fetchval(self.sql["idempotency_claim"], *key):
                # The key's first request committed: its answer again (enqueue's mechanism).
                row = await conn.fetchrow(self.sql["idempotency_answer"], key[0])
                if row is None or row["body_hash"] != key[1]:
                    raise Rollback(KeyMismatch())
                raise Rollback(Replayed(json.loads(row["answer"])))
            try:
                row = await conn.fetchrow(self.sql["replay"], *where.args(), dry_run, actor)
            except asyncpg.UniqueViolationError as exc:
                if not live_row_taken(exc):
                    raise
                # An enqueue gave one of the submissions a live row meanwhile.
                raise Rollback(_LostRace()) from None
            assert row is not None
            outcome = ReplayOutcome.from_row(row, dry_run)
            if key is not None:
                await conn.execute(self.sql["idempotency_save"], key[0],
                                   json.dumps(outcome.answer()))
            return outcome
        done = await self.db.write(work, page=True)
        if isinstance(done, _LostRace):
            raise Conflict("a matching submission got a live queue row meanwhile; try again")
        return done
