"""What the drift canary tests share: a kind with a canary, a reviewed history, the marker."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import httpx

from aiqueue.settings import Settings
from aiqueue.settings.canary import Canary
from aiqueue.settings.kinds import Kind, Pool, QueueConfig
from tests.conftest import AUTH, FN, add_submissions, make_settings
from tests.integration.calibration_kit import dispatched, drain

MAX = 10


def canary_settings(db_url: str, **canary: Any) -> Settings:
    """The default kind `mark`, with a drift canary (live: the pool has no batch API)."""
    kind = Kind(name="mark", pool="default", function_url=FN,
                canary=Canary(**{"rows": 10, "every_seconds": 3600.0, **canary}))
    pool = Pool(name="default", max_in_flight=100)
    return make_settings(db_url, max_in_flight=100,
                         queue_file=QueueConfig({"default": pool}, {"mark": kind}))


def ai_score(content: str) -> int:
    """The marker's deterministic score of an answer ("answer 7" -> 7 % 11)."""
    return int(content.rsplit(" ", 1)[-1]) % (MAX + 1)


def teacher_score(content: str) -> int:
    """The teacher's: the marker's, except every fourth answer one point lower."""
    k = int(content.rsplit(" ", 1)[-1])
    score = ai_score(content)
    return max(score - 1, 0) if k % 4 == 0 and score > 0 else score


async def webhook(client: httpx.AsyncClient, sent: dict[str, Any], score: int,
                  model: str, **usage: Any) -> httpx.Response:
    item = {"queue_id": sent["queue_id"], "token": sent["callback_token"],
            "status": "completed",
            "result": {"score": score, "max_score": MAX, "feedback": "secret words"},
            "usage": {"model": model, "prompt_tokens": 100, "completion_tokens": 20, **usage}}
    return await client.post("/webhooks/ai-mark", json=[item])


async def reviewed_history(client: httpx.AsyncClient, conn: asyncpg.Connection,
                           function: Any, assignments: int = 3, each: int = 5
                           ) -> list[uuid.UUID]:
    """Marked (model m-1) and reviewed answers in several assignments: the teacher accepts
    each, adjusting the scores teacher_score() lowers."""
    subs: list[uuid.UUID] = []
    for a in range(assignments):
        ids = await add_submissions(conn, each, f"hw-{a}")
        # Distinct answers across assignments ("answer 0".."answer 14").
        for k, sid in enumerate(ids):
            await conn.execute("UPDATE submissions SET content = $2 WHERE id = $1", sid,
                               f"answer {a * each + k}")
        r = await client.post("/api/marking/enqueue", headers=AUTH, json={
            "assignment_id": f"hw-{a}", "submission_ids": [str(s) for s in ids]})
        assert r.status_code == 202, r.text
        subs += ids
    await drain(client)
    for sent in marking_calls(function):
        content = sent["submission"]["content"]
        r = await webhook(client, sent, ai_score(content), "m-1")
        assert r.json()["accepted"] == 1, r.text
        body: dict[str, Any] = {}
        if teacher_score(content) != ai_score(content):
            body = {"result": {"score": teacher_score(content), "max_score": MAX}}
        r = await client.post(f"/api/marking/queue/{sent['queue_id']}/accept", headers=AUTH,
                              json=body)
        assert r.status_code == 200, r.text
    function.calls.clear()
    return subs


def marking_calls(function: Any) -> list[dict[str, Any]]:
    return [b for b in dispatched(function) if not b.get("canary")]


def canary_calls(function: Any) -> list[dict[str, Any]]:
    return [b for b in dispatched(function) if b.get("canary")]


async def answer_canaries(client: httpx.AsyncClient, function: Any, model: str,
                          off: int = 0) -> tuple[int, float]:
    """Answer every canary dispatch so far as `model` would: the marker's score, and
    `off` points off every second one.  How many were answered, and the share of them
    equal to the teacher's score (the canary's `exact`, computed here on its own)."""
    # In answer order ("answer 3" before "answer 12"), so "every second one" is fixed.
    calls = sorted(canary_calls(function),
                   key=lambda b: int(b["submission"]["content"].rsplit(" ", 1)[-1]))
    function.calls.clear()
    equal = 0
    for k, sent in enumerate(calls):
        content = sent["submission"]["content"]
        score = ai_score(content)
        if off and k % 2 == 0:
            score = score + off if score + off <= MAX else score - off
        equal += score == teacher_score(content)
        r = await webhook(client, sent, score, model)
        assert r.json()["accepted"] == 1, r.text
    return len(calls), equal / len(calls) if calls else 0.0


async def marks_of(conn: asyncpg.Connection) -> dict[uuid.UUID, str]:
    rows = await conn.fetch("SELECT id, ai_result::text AS r, ai_marked_at FROM submissions")
    return {r["id"]: json.dumps([r["r"], str(r["ai_marked_at"])]) for r in rows}
