"""The monitoring page: one method per named query of sql/monitor.sql."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.models import QueueRow, Status


class MonitorQueries(Gateway):
    """Throughput buckets, the rows newer than a cursor, the assignments to filter by."""

    async def monitor_throughput(
        self, window_seconds: float, bucket_seconds: float
    ) -> list[tuple[datetime, int, int]]:
        """(bucket start, completed, failed) for every bucket of the window, oldest first."""
        rows = await self._fetch("monitor_throughput", window_seconds, bucket_seconds,
                                page=True)
        return [(r["bucket"], int(r["completed"]), int(r["failed"])) for r in rows]

    async def monitor_rows_newer(
        self,
        *,
        status: Status | None,
        assignment_id: str | None,
        before: tuple[datetime, UUID],
        limit: int,
        group: str | None = None,
        kind: str | None = None,
    ) -> list[QueueRow]:
        """Up to `limit` rows newer than the cursor, nearest it first."""
        rows = await self._fetch(
            "monitor_rows_newer", status, assignment_id, before[0], before[1], limit, group,
            kind, page=True,
        )
        return [QueueRow.from_row(r) for r in rows]

    async def monitor_assignments(self, limit: int) -> list[str]:
        """Distinct assignment ids in the queue, alphabetically, at most `limit`."""
        rows = await self._fetch("monitor_assignments", limit, page=True)
        return [r["assignment_id"] for r in rows]
