"""The teacher's list of held results (docs/review-holds.md): what needs a teacher, first.

A question asked by several rows of one payload is one question with its rows:
the store names it by one question_id, and this groups the rows under it.
"""

from __future__ import annotations

from uuid import UUID

from aiqueue.models.holds import Hold
from aiqueue.runtime import Runtime
from aiqueue.wire.holds import AskedQuestion, HeldResults, HeldRow

# The most held results one list shows (the oldest first).
MAX_HELD = 1000


async def held(rt: Runtime, assignment_id: str) -> list[Hold]:
    """The assignment's held results waiting for a teacher, oldest first."""
    return await rt.store.review_needed(assignment_id, MAX_HELD)


def review_needed(assignment_id: str, holds: list[Hold]) -> HeldResults:
    """GET /api/marking/review_needed's answer from the held results."""
    questions: dict[UUID, AskedQuestion] = {}
    for h in holds:
        if h.question_id is None:
            continue
        q = questions.get(h.question_id)
        if q is None:
            questions[h.question_id] = AskedQuestion(
                question_id=h.question_id, question=h.question or "",
                payload_version=h.payload_version, rows=[h.queue_id], answered=False)
        else:
            q.rows.append(h.queue_id)
    items = [HeldRow(queue_id=h.queue_id, submission_id=h.submission_id, reason=h.reason,
                     best_guess=h.best_guess, max_score=h.max_score, held_at=h.held_at,
                     question_id=h.question_id) for h in holds]
    return HeldResults(assignment_id=assignment_id, count=len(items), items=items,
                        questions=list(questions.values()))
