"""Alerts (docs/operating/alerts.md): one method per named query of sql/alerts.sql."""

from __future__ import annotations

from datetime import datetime

from aiqueue.db.gateway import Gateway
from aiqueue.models import OpenAlert


class AlertQueries(Gateway):
    """Open and resolve the alerts; read the open ones."""

    async def evaluate_alerts(self, *, backlog: float, stalled: float, failures_min: int,
                              failure_rate: float, p95: float = 600.0,
                              at: datetime | None = None
                              ) -> list[tuple[str, str]]:
        """Open and resolve alerts as of `at` (None: now); the changes, (alert, change)."""
        # A repeat after a lost answer finds the alerts already open or resolved.
        rows = await self._write("evaluate_alerts", at, backlog, stalled, failures_min,
                                 failure_rate, p95, idempotent=True)
        return [(r["alert"], r["change"]) for r in rows]

    async def open_alerts(self) -> list[OpenAlert]:
        return [OpenAlert.from_row(r) for r in await self._fetch("open_alerts", page=True)]
