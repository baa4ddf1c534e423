"""The overnight lane's statements: one method per named query of sql/batch.sql."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from aiqueue.db.gateway import Gateway
from aiqueue.models.batch import BatchRow, BatchState, LaneBatch, LineFailure


class BatchQueries(Gateway):
    """Pack rows into a recorded batch, reconcile, release, fail lines, fall back."""

    async def batch_open(self, pool: str, provider: str, model: str, limit: int,
                         money: str | None = None, base_url: str | None = None,
                         key_env: str | None = None) -> list[BatchRow]:
        """Record a batch and move up to `limit` waiting rows into it (none: no batch),
        charged to turns and spend at batch prices (`money`: the plan's JSON)."""
        async def work(conn: asyncpg.Connection) -> list[asyncpg.Record]:
            rows: list[asyncpg.Record] = await conn.fetch(
                self.sql["batch_open"], pool, provider, model, limit, money, base_url, key_env)
            if rows:
                await conn.execute(self.sql["batch_charge"], rows[0]["batch_id"], money)
            return rows
        return [BatchRow.from_row(r) for r in await self.db.write(work)]

    async def batch_add(self, pool: str, batch_id: int, limit: int, money: str | None = None
                        ) -> list[BatchRow]:
        """Move up to `limit` more waiting rows into batch `batch_id` (still being packed),
        charged as `batch_open` charges."""
        async def work(conn: asyncpg.Connection) -> list[asyncpg.Record]:
            rows: list[asyncpg.Record] = await conn.fetch(self.sql["batch_add"], pool,
                                                          batch_id, limit, money)
            if rows:
                await conn.execute(self.sql["batch_charge_more"], batch_id, money,
                                   [r["queue_id"] for r in rows])
            return rows
        return [BatchRow.from_row(r) for r in await self.db.write(work)]

    async def batch_held(self, batch_id: int) -> set[UUID]:
        return {r["queue_id"] for r in await self._fetch("batch_held", batch_id)}

    async def batch_submitted(self, batch_id: int, provider_batch_id: str,
                              files: Sequence[str], look_in: float) -> bool:
        """Record the provider's batch; False when a reconcile gave its rows back meanwhile."""
        rows = await self._write("batch_submitted", batch_id, provider_batch_id, list(files),
                                 look_in)
        return bool(rows)

    async def batch_release(self, batch_id: int, queue_ids: Sequence[UUID] | None = None
                            ) -> int:
        ids = None if queue_ids is None else list(queue_ids)
        return await self._refunded("batch_release", batch_id, ids)

    async def _refunded(self, name: str, batch_id: int, *args: Any) -> int:
        """Rows leave a batch unpaid: packing's charge is given back, and they move, in one
        transaction."""
        async def work(conn: asyncpg.Connection) -> int:
            await conn.execute(self.sql["batch_refund"], batch_id,
                               args[0] if args else None)
            return await self._bulk_move(conn, name, batch_id, *args)
        return int(await self.db.write(work, idempotent=True))

    async def _bulk_move(self, conn: asyncpg.Connection, name: str, *args: Any) -> int:
        """Run statement `name`, which moves many of a batch's rows back to pending (their
        groups join their turns once each, in the statement)."""
        row = await conn.fetchrow(self.sql[name], *args)
        assert row is not None, "an aggregate always answers one row"
        return int(row["n"])

    async def batch_abandon(self, batch_id: int, error: str) -> bool:
        return bool(await self._write("batch_abandon", batch_id, error, idempotent=True))

    async def batch_abandon_open(self, batch_id: int, error: str) -> bool:
        return bool(await self._write("batch_abandon_open", batch_id, error, idempotent=True))

    async def batches_due(self, pool: str, lease: float) -> list[LaneBatch]:
        return [LaneBatch.from_row(r) for r in await self._write("batches_due", pool, lease)]

    async def batch_rows(self, batch_id: int) -> list[BatchRow]:
        return [BatchRow.from_row(r) for r in await self._fetch("batch_rows", batch_id)]

    async def batch_lines(self, batch_id: int) -> list[BatchRow]:
        """Every line the batch was sent with, and whether its row is still held by it."""
        return [BatchRow.from_row(r) for r in await self._fetch("batch_lines", batch_id)]

    async def batch_lines_failed(self, failures: Sequence[LineFailure], max_attempts: int,
                                 window: float, attempts: str | None = None) -> int:
        """Lines that gave no mark; `attempts`: the kinds' own max attempts ({kind: n} as
        JSON; QueueConfig.attempts), else `max_attempts`."""
        if not failures:
            return 0
        args = ([f.queue_id for f in failures], [f.dispatch_seq for f in failures],
                [f.code for f in failures], [f.retryable for f in failures], max_attempts,
                window, attempts or "{}")

        async def work(conn: asyncpg.Connection) -> int:
            return await self._bulk_move(conn, "batch_lines_failed", *args)
        return int(await self.db.write(work, idempotent=True))

    async def batch_fallback(self, batch_id: int) -> int:
        return await self._refunded("batch_fallback", batch_id)

    async def batch_mark(self, batch_id: int, state: BatchState, files: Sequence[str],
                         look_in: float) -> None:
        await self._write("batch_mark", batch_id, state, list(files), look_in, idempotent=True)

    async def batch_prune(self, older_than: float) -> None:
        await self._write("batch_prune", older_than, idempotent=True)

    async def batch_lane_rows(self, queue_ids: Sequence[UUID], deadline: datetime,
                              live_at: datetime) -> None:
        await self._write("batch_lane_rows", list(queue_ids), deadline, live_at,
                          idempotent=True)
