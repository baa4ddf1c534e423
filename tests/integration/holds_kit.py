"""What the review-hold tests share: an app whose function is respx, dispatches, answers."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from tests.conftest import AUTH
from tests.integration.calibration_kit import drain

QUESTION = "Does 'about 10 m/s²' count as the value of g?"
PAYLOAD = {"question": "What is g?", "rubric": "9.8 m/s²", "max_score": 10}


async def enqueue(client: httpx.AsyncClient, subs: list[uuid.UUID], assignment: str = "hw-h",
                  payload: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": assignment, "submission_ids": [str(s) for s in subs],
        "payload": PAYLOAD if payload is None else payload, **extra})
    assert r.status_code == 202, r.text
    await drain(client)
    body: dict[str, Any] = r.json()
    return body


def sent(function: Any) -> list[dict[str, Any]]:
    """Every dispatch the function received, in order."""
    return [json.loads(c.request.content) for c in function.calls]


def item(job: dict[str, Any], review: dict[str, Any] | None = None, score: float = 7,
         **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"queue_id": job["queue_id"], "token": job["callback_token"],
                            "status": "completed",
                            "result": {"score": score, "max_score": 10, "feedback": "f"},
                            **extra}
    if review is not None:
        body["review"] = review
    return body


async def post(client: httpx.AsyncClient, items: list[dict[str, Any]]) -> httpx.Response:
    return await client.post("/webhooks/ai-mark", json=items)


def ask(question: str = QUESTION, best_guess: float | None = 6) -> dict[str, Any]:
    review: dict[str, Any] = {"reason": "clarification", "question": question}
    if best_guess is not None:
        review["best_guess"] = best_guess
    return review
