"""The teacher's results page: one method per named query of sql/results.sql."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.models import AssignmentInfo, SubmissionId, SubmissionResult


class ResultsQueries(Gateway):
    """An assignment's details, its submissions' results, the unmarked ones, seeding."""

    async def assignment_info(self, assignment_id: str) -> AssignmentInfo | None:
        row = await self._fetchrow("assignment_info", assignment_id)
        return AssignmentInfo.from_row(row) if row else None

    async def save_assignment(
        self, assignment_id: str, title: str, payload: dict[str, Any]
    ) -> None:
        await self._write("save_assignment", assignment_id, title, json.dumps(payload),
                          page=True, idempotent=True)

    async def submission_results(self, assignment_id: str, limit: int) -> list[SubmissionResult]:
        rows = await self._fetch("submission_results", assignment_id, limit, None, page=True)
        return [SubmissionResult.from_row(r) for r in rows]

    async def submission_result(
        self, submission_id: UUID, assignment_id: str
    ) -> SubmissionResult | None:
        row = await self._fetchrow("submission_results", assignment_id, 1, submission_id)
        return SubmissionResult.from_row(row) if row else None

    async def unmarked_submissions(self, assignment_id: str, limit: int) -> list[SubmissionId]:
        rows = await self._fetch("unmarked_submissions", assignment_id, limit)
        return [SubmissionId(r["id"]) for r in rows]

    async def seed_submissions(self, submissions: Sequence[dict[str, Any]]) -> int:
        """Insert submissions that are not there yet; how many were new."""
        rows = await self._write("seed_submissions", json.dumps(list(submissions)),
                                 page=True)
        return len(rows)
