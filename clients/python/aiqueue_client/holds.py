"""The client's calls for review holds (docs/review-holds.md): the teacher's list of held
results and the answer to a marker's question."""

from __future__ import annotations

import uuid
from typing import cast

from aiqueue_client.transport import Transport, actor_header
from aiqueue_client.types import Clarified, HeldResults


class HoldCalls(Transport):
    """What the marker held for a teacher, and the teacher's answers."""

    async def review_needed(self, assignment_id: str) -> HeldResults:
        """The results the marker held for a teacher, each question once with its rows."""
        answer = await self._call("GET", "/api/marking/review_needed",
                                  params={"assignment_id": assignment_id}, retry=True)
        return cast(HeldResults, answer.json())

    async def clarify(self, assignment_id: str, question_id: str | uuid.UUID, answer: str, *,
                      actor: str | None = None) -> Clarified:
        """Answer a marker's question once: a marking note in a new payload, and the rows
        that asked (and the ones not yet sent) marked under it."""
        body = {"assignment_id": assignment_id, "question_id": str(question_id),
                "answer": answer}
        response = await self._call("POST", "/api/marking/clarify", json=body,
                                    headers=actor_header(actor))
        return cast(Clarified, response.json())
