"""What the calibration tests share: chain steps until dry, the dispatches, results, enqueues."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import httpx

from tests.conftest import AUTH


async def drain(client: httpx.AsyncClient) -> None:
    """Chain steps until one claims nothing (the chain's own request is only mocked)."""
    for _ in range(200):
        r = await client.post("/api/marking/process-queue", headers=AUTH)
        assert r.status_code == 200
        if r.json()["claimed"] is None:
            return
    raise AssertionError("the chain never ran dry")


def dispatched(function: Any) -> list[dict[str, Any]]:
    return [json.loads(c.request.content) for c in function.calls]


async def complete(client: httpx.AsyncClient, sent: dict[str, Any], score: int,
                   criteria: list[dict[str, Any]] | None = None) -> None:
    result: dict[str, Any] = {"score": score, "max_score": 10, "feedback": "secret words"}
    if criteria is not None:
        result["criteria"] = criteria
    item = {"queue_id": sent["queue_id"], "token": sent["callback_token"],
            "status": "completed", "result": result, "usage": {"model": "m-1"}}
    r = await client.post("/webhooks/ai-mark", json=[item])
    assert r.json().get("accepted") == 1, r.text


async def enqueue(client: httpx.AsyncClient, subs: list[uuid.UUID], **extra: Any
                  ) -> dict[str, Any]:
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-7", "submission_ids": [str(s) for s in subs], **extra})
    assert r.status_code == 202, r.text
    body: dict[str, Any] = r.json()
    return body


async def statuses(conn: asyncpg.Connection) -> dict[str, int]:
    rows = await conn.fetch("SELECT status, count(*) AS n FROM ai_marking_queue GROUP BY 1")
    return {r["status"]: r["n"] for r in rows}
