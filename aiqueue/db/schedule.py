"""Scheduled rows and expiry: one method per named query of sql/schedule.sql."""

from __future__ import annotations

from aiqueue.db.gateway import Gateway


class ScheduleQueries(Gateway):
    """The expiry sweep, and when scheduled rows and expiries come due."""

    async def expire_rows(self) -> int:
        """End pending rows whose expires_at has passed; how many (one bounded batch)."""
        return int(await self._write_val("expire_rows", idempotent=True))

    async def next_expiry(self) -> float | None:
        value = await self._fetchval("next_expiry")
        return None if value is None else float(value)

    async def next_scheduled(self) -> float | None:
        value = await self._fetchval("next_scheduled")
        return None if value is None else float(value)
