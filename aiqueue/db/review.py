"""Review of applied results: one method per named query of sql/review.sql."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.models import AppliedResult, ReviewOutcome


class ReviewQueries(Gateway):
    """Accept and revert applied results; their history."""

    async def accept(self, queue_id: UUID, actor: str | None,
                     adjusted: dict[str, Any] | None) -> ReviewOutcome:
        adjusted_json = json.dumps(adjusted) if adjusted is not None else None
        rows = await self._write("accept", queue_id, actor, adjusted_json)
        return ReviewOutcome.from_row(rows[0])  # the function always answers one row

    async def revert(self, queue_id: UUID, actor: str | None) -> ReviewOutcome:
        rows = await self._write("revert", queue_id, actor)
        return ReviewOutcome.from_row(rows[0])

    async def review_run(self, assignment_id: str, action: str,
                         actor: str | None) -> tuple[int, int]:
        """(done, superseded) over the assignment's latest run's unreviewed results."""
        rows = await self._write("review_run", assignment_id, action, actor, page=True)
        return int(rows[0]["done"]), int(rows[0]["superseded"])

    async def result_history(self, submission_id: UUID, limit: int) -> list[AppliedResult]:
        rows = await self._fetch("result_history", submission_id, limit, page=True)
        return [AppliedResult.from_row(r) for r in rows]

    async def review_of(self, queue_id: UUID) -> dict[str, Any] | None:
        """The review fields of a row's applied result (no result), or None."""
        row = await self._fetchrow("review_of", queue_id)
        return dict(row) if row else None

    async def submission_exists(self, submission_id: UUID) -> bool:
        return bool(await self._fetchval("submission_exists", submission_id))
