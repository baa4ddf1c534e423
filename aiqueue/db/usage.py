"""Usage and the /metrics counters: one method per named query of sql/usage.sql."""

from __future__ import annotations

from datetime import datetime

from aiqueue.db.gateway import Gateway
from aiqueue.models import CacheCounter, TallyRow, UsageCard, UsageRow


class UsageQueries(Gateway):
    """Add up usage; read the counters and the histogram's buckets."""

    async def usage_report(self, since: datetime, until: datetime, by: str,
                           timezone: str = "UTC") -> list[UsageRow]:
        """One row per key, then the total (key None); days are dates in `timezone`."""
        rows = await self._fetch("usage_report", since, until, by, timezone, page=True)
        return [UsageRow.from_row(r) for r in rows]

    async def usage_card(self, since: datetime, today: datetime, until: datetime,
                         kept_seconds: float) -> UsageCard:
        """/ai-queue's cost card over [since, until), today from `today`; hours older than
        `kept_seconds` (the results' keep period) are summed from the results."""
        rows = await self._fetch("usage_card", since, today, until, kept_seconds, page=True)
        return UsageCard.from_rows(rows)

    async def metrics_counters(self) -> list[TallyRow]:
        return [TallyRow.from_row(r) for r in await self._fetch("metrics_counters", page=True)]

    async def cache_counters(self) -> list[CacheCounter]:
        """Each pool's prompt cache counters (docs/prompt-cache.md)."""
        return [CacheCounter.from_row(r) for r in await self._fetch("cache_counters", page=True)]

    async def metrics_buckets(self) -> list[float]:
        return [float(r["le"]) for r in await self._fetch("metrics_buckets", page=True)]
