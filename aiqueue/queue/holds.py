"""Review holds (docs/review-holds.md): a result the marker was unsure of waits for a teacher.

A webhook item's `review` turns its result into a held one here: applied like
any result (so the row ends `completed` and nothing is lost), with
`review_required`, the reason, the question and the best guess as its score.
The database records the hold and tells the host (86_holds.sql); a teacher
accepts it, adjusts it, or answers its question (clarify.py).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from aiqueue.runtime import Runtime
from aiqueue.wire import EnqueueRequest, payload_json
from aiqueue.wire.enqueue import EMPTY_PAYLOAD
from aiqueue.wire.holds import ReviewRequest


def held(result: dict[str, Any] | None, review: ReviewRequest) -> dict[str, Any]:
    """The result a held item applies: its score is the marker's best guess (or none)."""
    doubt: dict[str, Any] = {"reason": review.reason, "best_guess": review.best_guess}
    if review.question is not None:
        doubt["question"] = review.question
    return {**(result or {}), "score": review.best_guess, "review_required": True,
            "review_reason": review.reason, "review": doubt}


def is_held(result: object) -> bool:
    """Whether an applied result is held for a teacher."""
    return isinstance(result, dict) and result.get("review_required") is True


# A teacher's answers to the marker's questions, in the payload (queue/clarify.py).
NOTES = "marking_notes"


def rubric_sha256(payload: dict[str, Any]) -> bytes:
    """The rubric a payload's notes belong to: the sha256 of its canonical JSON, notes aside."""
    base = {k: v for k, v in payload.items() if k != NOTES}
    text = json.dumps(base, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).digest()


def with_notes(payload: dict[str, Any], notes: list[dict[str, Any]]) -> dict[str, Any]:
    """The payload with every note it lacks appended (one per question), in order."""
    have = payload.get(NOTES)
    kept = [n for n in have if isinstance(n, dict)] if isinstance(have, list) else []
    seen = {n.get("question_id") for n in kept}
    added = [n for n in notes if n.get("question_id") not in seen]
    return {**payload, NOTES: [*kept, *added]} if added else payload


async def noted(rt: Runtime, request: EnqueueRequest) -> EnqueueRequest:
    """The enqueue's payload with the notes teachers gave for its rubric (unchanged: none)."""
    if request.payload == EMPTY_PAYLOAD:
        return request
    payload = json.loads(request.payload)
    notes = await rt.store.rubric_notes(rubric_sha256(payload))
    if not notes:
        return request
    fuller = with_notes(payload, notes)
    return request if fuller is payload else replace(request, payload=payload_json(fuller))
