"""Time (CONTRACT §9d): one method per named query of sql/time.sql."""

from __future__ import annotations

from datetime import datetime

from aiqueue.db.gateway import Gateway
from aiqueue.models import OpenAlert


class TimeQueries(Gateway):
    """The expiry sweep, when scheduled rows and expiries come due, and the alerts."""

    async def expire_rows(self) -> int:
        """End pending rows whose expires_at has passed; how many (one bounded batch)."""
        return int(await self._write_val("expire_rows", idempotent=True))

    async def next_expiry(self) -> float | None:
        value = await self._fetchval("next_expiry")
        return None if value is None else float(value)

    async def next_scheduled(self) -> float | None:
        value = await self._fetchval("next_scheduled")
        return None if value is None else float(value)

    async def evaluate_alerts(self, *, backlog: float, stalled: float, failures_min: int,
                              failure_rate: float, p95: float = 600.0,
                              at: datetime | None = None
                              ) -> list[tuple[str, str]]:
        """Open and resolve alerts as of `at` (None: now); the changes, (alert, change)."""
        # A repeat after a lost answer finds the alerts already open or resolved.
        rows = await self._write("alerts_evaluate", at, backlog, stalled, failures_min,
                                 failure_rate, p95, idempotent=True)
        return [(r["alert"], r["change"]) for r in rows]

    async def open_alerts(self) -> list[OpenAlert]:
        return [OpenAlert.from_row(r) for r in await self._fetch("alerts_open", page=True)]
