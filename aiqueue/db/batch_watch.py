"""Watching the overnight lane: one method per named query of sql/batch_watch.sql."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from aiqueue.db.gateway import Gateway
from aiqueue.models.batch import BatchGauges, OpenBatch, OrphanAccount


class BatchWatchQueries(Gateway):
    """The fallback's figures, the next look, the Batches card and /metrics."""

    async def batch_pending(self, batch_id: int) -> tuple[int, datetime | None]:
        row = (await self._fetch("batch_pending", batch_id))[0]
        return int(row["n"]), row["deadline"]

    async def batch_backlog(self, pool: str) -> tuple[int, int | None]:
        row = (await self._fetch("batch_backlog", pool))[0]
        return int(row["backlog"]), row["learned"]

    async def batch_next_look(self) -> float | None:
        value = await self._fetchval("batch_next_look")
        return None if value is None else float(value)

    async def batch_orphans(self, batch_pools: Sequence[str]) -> list[OrphanAccount]:
        """The accounts of open batches whose pool is not among `batch_pools` any more."""
        return [OrphanAccount.from_row(r)
                for r in await self._fetch("batch_orphans", list(batch_pools))]

    async def batches_open(self, limit: int = 50) -> list[OpenBatch]:
        """The batches the provider may still keep something of, oldest first."""
        return [OpenBatch.from_row(r) for r in await self._fetch("batches_open", limit)]

    async def batch_gauges(self) -> BatchGauges:
        rows: dict[tuple[str, str], int] = {}
        open_: dict[str, int] = {}
        for r in await self._fetch("batch_gauges"):
            if r["what"] == "rows":
                rows[(r["pool"], r["state"])] = int(r["n"])
            else:
                open_[r["pool"]] = int(r["n"])
        return BatchGauges(rows, open_)

    async def batch_live_seconds(self) -> float | None:
        value = await self._fetchval("batch_live_seconds")
        return None if value is None else float(value)

    async def batch_open_count(self) -> int:
        return int(await self._fetchval("batch_open_count"))
