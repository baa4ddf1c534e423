"""Operator actions and reads of sql/rows.sql: retry, cancel, pause; rows, control, stats."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from aiqueue.db.calls import Rollback
from aiqueue.db.enqueue import live_row_taken
from aiqueue.db.gateway import Gateway
from aiqueue.errors import Conflict
from aiqueue.flow import FlowState, KindCount, PoolState
from aiqueue.models import Attempt, Control, QueueRow, Stats, Status


class RowQueries(Gateway):
    """What the pages, the API's reads and the operator's actions ask of the queue's rows."""

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

    async def _retry(self, name: str, *args: Any) -> Any:
        """A manual retry (failed -> pending): 409 if the submission has a live row meanwhile."""
        async def work(conn: asyncpg.Connection) -> list[asyncpg.Record] | None:
            try:
                rows: list[asyncpg.Record] = await conn.fetch(self.sql[name], *args)
            except asyncpg.UniqueViolationError as exc:
                if not live_row_taken(exc):
                    raise
                raise Rollback(None) from None
            return rows
        rows = await self.db.write(work, page=True)
        if rows is None:
            raise Conflict("the submission already has a live queue row")
        return rows[0][0] if rows else None

    # -- reading ----------------------------------------------------------

    async def control(self, threshold: int, pool: str | None = None) -> Control:
        """The pause, and the breaker and hold of `pool` (None: the default pool)."""
        row = await self._fetchrow("control", threshold, pool)
        assert row is not None, "migration inserts the control row"
        return Control.from_row(row)

    async def flow_state(self, cap: int, window_seconds: float,
                         pool: str | None = None) -> FlowState:
        """L, the hold, the refusal counters and the budget window's use (docs/concepts.md).

        Of one pool (None: the default pool): `cap` is that pool's max_in_flight.
        """
        row = await self._fetchrow("flow_state", cap, window_seconds, pool)
        assert row is not None, "migration inserts the control row"
        return FlowState.from_row(row)

    async def pool_states(self, plan: str, threshold: int,
                          window_seconds: float) -> list[PoolState]:
        """Each pool's L, hold, breaker, refusals, window use and slots (docs/concepts.md)."""
        rows = await self._fetch("pool_states", plan, threshold, window_seconds)
        return [PoolState.from_row(r) for r in rows]

    async def kind_counts(self) -> list[KindCount]:
        """Rows per kind, pool and status (from the count deltas)."""
        return [KindCount.from_row(r) for r in await self._fetch("kind_counts")]

    async def stats(self, at: datetime | None = None, timezone: str = "UTC") -> Stats:
        """The headline figures as of `at` (None: the database's now()); "today" is the day
        where `timezone` is (QUEUE_TIMEZONE)."""
        async def work(conn: asyncpg.Connection) -> asyncpg.Record | None:
            await conn.execute(self.sql["serial_plans"])
            row: asyncpg.Record | None = await conn.fetchrow(self.sql["stats"], at, timezone)
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
