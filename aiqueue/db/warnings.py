"""Budget warnings: one method per named query of sql/warnings.sql."""

from __future__ import annotations

from datetime import datetime

from aiqueue.db.gateway import Gateway
from aiqueue.models import NearCap


class WarningQueries(Gateway):
    """Warnings before a spend cap runs out, and the groups near one."""

    async def budget_warnings(self, money: str | None, at: datetime | None = None
                              ) -> list[tuple[str, str, str, float]]:
        """Send the warnings due as of `at` (None: now); each sent as (cap, pool, group,
        threshold)."""
        if money is None:
            return []
        # A repeat after a lost answer finds the warnings already remembered.
        rows = await self._write("budget_warnings", money, at, idempotent=True)
        return [(r["cap"], r["pool"], r["group_key"], r["threshold"]) for r in rows]

    async def budget_near(self, money: str | None) -> list[NearCap]:
        if money is None:
            return []
        return [NearCap.from_row(r) for r in await self._fetch("budget_near", money, page=True)]
