"""Review, usage and counters: one method per named query of sql/review.sql."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.models import AppliedResult, ReviewOutcome, TallyRow, UsageRow


class ReviewQueries(Gateway):
    """Accept and revert applied results; add up usage; read the counters."""

    async def accept(self, queue_id: UUID, actor: str | None,
                     adjusted: dict[str, Any] | None) -> ReviewOutcome:
        adjusted_json = json.dumps(adjusted) if adjusted is not None else None
        rows = await self._write("review_accept", queue_id, actor, adjusted_json)
        return ReviewOutcome.from_row(rows[0])  # the function always answers one row

    async def revert(self, queue_id: UUID, actor: str | None) -> ReviewOutcome:
        rows = await self._write("review_revert", queue_id, actor)
        return ReviewOutcome.from_row(rows[0])

    async def review_run(self, assignment_id: str, action: str,
                         actor: str | None) -> tuple[int, int]:
        """(done, superseded) over the assignment's latest run's unreviewed results."""
        rows = await self._write("review_run", assignment_id, action, actor, page=True)
        return int(rows[0]["done"]), int(rows[0]["superseded"])

    async def result_history(self, submission_id: UUID, limit: int) -> list[AppliedResult]:
        rows = await self._fetch("review_history", submission_id, limit, page=True)
        return [AppliedResult.from_row(r) for r in rows]

    async def review_of(self, queue_id: UUID) -> dict[str, Any] | None:
        """The review fields of a row's applied result (no result), or None."""
        row = await self._fetchrow("review_of_row", queue_id)
        return dict(row) if row else None

    async def submission_exists(self, submission_id: UUID) -> bool:
        return bool(await self._fetchval("review_submission_exists", submission_id))

    async def usage(self, since: datetime, until: datetime, by: str,
                    timezone: str = "UTC") -> list[UsageRow]:
        """One row per key, then the total (key None); days are dates in `timezone`."""
        rows = await self._fetch("usage_report", since, until, by, timezone, page=True)
        return [UsageRow.from_row(r) for r in rows]

    async def counters(self) -> list[TallyRow]:
        return [TallyRow.from_row(r) for r in await self._fetch("metrics_counters", page=True)]

    async def buckets(self) -> list[float]:
        return [float(r["le"]) for r in await self._fetch("metrics_buckets", page=True)]
