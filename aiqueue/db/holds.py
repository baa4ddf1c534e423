"""Review holds and the teacher's answers: one method per named query of sql/holds.sql."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.models.holds import Answered, AskedQuestion, Hold


class HoldQueries(Gateway):
    """The teacher's list of held results; a question's askers; an answer, once."""

    async def review_needed(self, assignment_id: str, limit: int) -> list[Hold]:
        rows = await self._fetch("review_needed", assignment_id, limit, page=True)
        return [Hold.from_row(r) for r in rows]

    async def asked_question(self, assignment_id: str, question_id: UUID) -> AskedQuestion | None:
        """The question as its rows asked it; None when no row of the assignment asked it."""
        row = await self._fetchrow("asked_question", assignment_id, question_id)
        return AskedQuestion.from_row(row) if row and row["payload"] is not None else None

    async def answer_question(self, question_id: UUID, assignment_id: str, base_sha256: bytes,
                              note: dict[str, Any], actor: str | None,
                              payload: dict[str, Any]) -> Answered | None:
        """Record the answer and put the assignment's waiting rows under `payload`, in one
        transaction; None when the question was answered already."""
        rows = await self._write("answer_question", question_id, assignment_id, base_sha256,
                                 json.dumps(note), actor, json.dumps(payload), page=True)
        return Answered.from_row(rows[0]) if rows else None

    async def rubric_notes(self, base_sha256: bytes) -> list[dict[str, Any]]:
        """Every note answered under a rubric, oldest first."""
        rows = await self._fetch("rubric_notes", base_sha256)
        return [json.loads(r["note"]) for r in rows]
