"""Review, usage and counters through the real app and a real PostgreSQL (function: respx)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.settings import ModelPrice
from aiqueue.web.app import create_app
from tests.conftest import (
    AUTH,
    SECRET,
    add_submissions,
    app_client,
    make_settings,
)
from tests.prom import value

PRICES = {"gpt-x": ModelPrice(input=2.0, output=8.0)}


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings(db_url, max_in_flight=0, model_prices=PRICES,
                                   metrics_token="metrics-token-0123456789"))
    async with app_client(app) as c:
        yield c


async def dispatch(client: httpx.AsyncClient, function: Any, sub: uuid.UUID,
                   assignment: str = "hw-7") -> dict[str, Any]:
    """Enqueue one submission; the dispatch the function received."""
    before = function.call_count
    r = await client.post("/api/marking/enqueue", headers=AUTH,
                          json={"assignment_id": assignment, "submission_ids": [str(sub)],
                                "remark": True})
    assert r.status_code == 202 and function.call_count == before + 1
    sent: dict[str, Any] = json.loads(function.calls.last.request.content)
    return sent


async def answer(client: httpx.AsyncClient, sent: dict[str, Any], score: float,
                 usage: dict[str, Any] | None = None) -> None:
    item = {"queue_id": sent["queue_id"], "token": sent["callback_token"], "status": "completed",
            "result": {"score": score, "max_score": 10, "feedback": "f"}, "usage": usage}
    r = await client.post("/webhooks/ai-mark", json=[item])
    assert r.json()["accepted"] == 1


async def marked(client: httpx.AsyncClient, function: Any, sub: uuid.UUID, score: float,
                 usage: dict[str, Any] | None = None, assignment: str = "hw-7") -> str:
    sent = await dispatch(client, function, sub, assignment)
    await answer(client, sent, score, usage)
    return str(sent["queue_id"])


async def test_accept_and_revert_one_row(client: httpx.AsyncClient, conn: asyncpg.Connection,
                                         function: Any):
    [sub] = await add_submissions(conn, 1, assignment_id="hw-7")
    q1 = await marked(client, function, sub, 4)
    r = await client.post(f"/api/marking/queue/{q1}/accept",
                          headers={**AUTH, "x-actor": "teacher-42"},
                          json={"result": {"score": 5, "max_score": 10}})
    assert r.status_code == 200
    body = r.json()
    assert body["queue_id"] == q1 and body["review"] == "accepted" and body["accepted_at"]
    # The adjusted result is kept beside the AI's; the submission keeps the AI's.
    assert json.loads(await conn.fetchval("SELECT ai_result::text FROM submissions")) == {
        "score": 4, "max_score": 10, "feedback": "f"}
    q2 = await marked(client, function, sub, 8)
    r = await client.post(f"/api/marking/queue/{q1}/revert", headers=AUTH)
    assert r.status_code == 409 and r.json()["error"] == "superseded"
    r = await client.post(f"/api/marking/queue/{q2}/revert", headers={**AUTH, "x-actor": "t-7"})
    assert r.status_code == 200 and r.json()["review"] == "reverted" and r.json()["reverted_at"]
    assert json.loads(await conn.fetchval("SELECT ai_result::text FROM submissions"))["score"] == 4
    for action in ("accept", "revert"):  # a reverted row is no longer completed
        r = await client.post(f"/api/marking/queue/{q2}/{action}", headers=AUTH)
        assert r.status_code == 409 and r.json()["error"] == "not_completed"
    history = (await client.get(f"/api/marking/submissions/{sub}/results", headers=AUTH)).json()
    items = history["items"]
    assert [i["queue_id"] for i in items] == [q2, q1]  # newest first
    assert items[0]["review"] == "reverted" and items[0]["actor"] == "t-7"
    assert items[1]["review"] == "accepted" and items[1]["actor"] == "teacher-42"
    assert items[1]["adjusted_result"] == {"score": 5, "max_score": 10}
    assert items[1]["result"]["score"] == 4 and items[1]["applied_at"]
    assert {"accepted_at", "reverted_at"} <= set(items[0])
    status = (await client.get(f"/api/marking/submissions/{sub}/status", headers=AUTH)).json()
    assert status["review"] == "reverted" and "progress" not in status


async def test_review_conflicts_and_bad_input(client: httpx.AsyncClient,
                                              conn: asyncpg.Connection, function: Any):
    [sub] = await add_submissions(conn, 1, assignment_id="hw-7")
    sent = await dispatch(client, function, sub)  # processing, no result yet
    q = sent["queue_id"]
    for action in ("accept", "revert"):
        r = await client.post(f"/api/marking/queue/{q}/{action}", headers=AUTH)
        assert r.status_code == 409 and r.json()["error"] == "not_completed"
        r = await client.post(f"/api/marking/queue/{uuid.uuid4()}/{action}", headers=AUTH)
        assert r.status_code == 404
        r = await client.post(f"/api/marking/queue/{q}/{action}")
        assert r.status_code == 401
    long_actor = {**AUTH, "x-actor": "x" * 201}
    assert (await client.post(f"/api/marking/queue/{q}/accept", headers=long_actor)
            ).status_code == 422
    for body in (b"[]", b'{"result": 3}', b'{"other": {}}'):
        r = await client.post(f"/api/marking/queue/{q}/accept", headers=AUTH, content=body)
        assert r.status_code == 422, body
    r = await client.post(f"/api/marking/queue/{q}/accept", headers=AUTH, content=b"{nope")
    assert r.status_code == 400
    r = await client.get(f"/api/marking/submissions/{uuid.uuid4()}/results", headers=AUTH)
    assert r.status_code == 404
    assert (await client.get(f"/api/marking/submissions/{sub}/results", headers=AUTH)
            ).json() == {"items": []}


async def test_whole_run_accept_and_revert(client: httpx.AsyncClient, conn: asyncpg.Connection,
                                           function: Any):
    subs = await add_submissions(conn, 3, assignment_id="hw-7")
    r = await client.post("/api/marking/enqueue", headers=AUTH,
                          json={"assignment_id": "hw-7", "submission_ids": [str(s) for s in subs]})
    assert r.json()["enqueued"] == 3
    answered = 0
    while answered < 3:  # each result dispatches the next row (the chain is mocked)
        await answer(client, json.loads(function.calls[answered].request.content), 6)
        answered += 1
    first = json.loads(function.calls[0].request.content)
    ok = await client.post(f"/api/marking/queue/{first['queue_id']}/accept", headers=AUTH)
    assert ok.status_code == 200
    r = await client.post("/api/marking/assignments/hw-7/revert",
                          headers={**AUTH, "x-actor": "head"})
    assert r.status_code == 200 and r.json() == {"reverted": 2, "superseded": 0}
    assert await conn.fetchval("SELECT count(*) FROM submissions WHERE ai_result IS NULL") == 2
    r = await client.post("/api/marking/assignments/hw-7/accept", headers=AUTH)
    assert r.json() == {"accepted": 0}
    # A later result on one submission (a new run) supersedes that row's revert.
    await marked(client, function, subs[0], 9)
    r = await client.post("/api/marking/assignments/hw-7/accept", headers=AUTH)
    assert r.json() == {"accepted": 1}
    assert (await client.post("/api/marking/assignments/hw-7/cancel", headers=AUTH)
            ).json() == {"cancelled": 0}  # the cancel route is still the cancel route


async def test_run_revert_counts_superseded(client: httpx.AsyncClient, conn: asyncpg.Connection,
                                            function: Any):
    [sub] = await add_submissions(conn, 1, assignment_id="hw-a")
    await marked(client, function, sub, 3, assignment="hw-a")
    # The same submission marked again under another assignment id (another run).
    await marked(client, function, sub, 5, assignment="hw-b")
    r = await client.post("/api/marking/assignments/hw-a/revert", headers=AUTH)
    assert r.json() == {"reverted": 0, "superseded": 1}


async def test_status_shows_the_last_progress_item_while_processing(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    [sub] = await add_submissions(conn, 1, assignment_id="hw-7")
    sent = await dispatch(client, function, sub)
    item = {"queue_id": sent["queue_id"], "token": sent["callback_token"], "status": "progress",
            "progress": {"current": 2, "total": 5, "message": "criterion 2 of 5"}}
    assert (await client.post("/webhooks/ai-mark", json=item)).json()["accepted"] == 1
    status = (await client.get(f"/api/marking/submissions/{sub}/status", headers=AUTH)).json()
    assert status["status"] == "processing" and status["review"] is None
    assert status["progress"] == {"current": 2, "total": 5, "message": "criterion 2 of 5"}
    await answer(client, sent, 7)
    status = (await client.get(f"/api/marking/submissions/{sub}/status", headers=AUTH)).json()
    assert status["review"] == "unreviewed" and "progress" not in status


async def test_usage_sums_match_what_the_function_reported(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    subs = await add_submissions(conn, 4, assignment_id="hw-7")
    reported: list[dict[str, Any]] = [
        {"model": "gpt-x", "prompt_tokens": 1000, "completion_tokens": 250},  # priced: 0.004
        {"model": "gpt-x", "prompt_tokens": 812, "completion_tokens": 164},   # 0.002936
        {"model": "llama", "prompt_tokens": 70, "completion_tokens": 30, "cost_usd": 0.5},
        {"model": "mystery", "prompt_tokens": 5, "completion_tokens": 6},     # unpriced
    ]
    for sub, usage in zip(subs, reported, strict=True):
        await marked(client, function, sub, 5, usage)
    stored = await conn.fetch("SELECT usage FROM ai_marking_queue ORDER BY seq")
    assert [json.loads(r["usage"])["prompt_tokens"] for r in stored] == [1000, 812, 70, 5]
    r = await client.get("/api/marking/usage?by=model", headers=AUTH)
    assert r.status_code == 200
    body = r.json()
    by = {i["key"]: i for i in body["items"]}
    assert by["gpt-x"]["prompt_tokens"] == 1812 and by["gpt-x"]["completion_tokens"] == 414
    assert by["gpt-x"]["cost_usd"] == pytest.approx(0.006936)
    assert by["llama"]["cost_usd"] == 0.5
    assert by["mystery"]["cost_usd"] is None and by["mystery"]["unpriced_jobs"] == 1
    total = body["total"]
    assert total["jobs"] == 4 and "key" not in total
    assert total["prompt_tokens"] == sum(u["prompt_tokens"] for u in reported)
    assert total["completion_tokens"] == sum(u["completion_tokens"] for u in reported)
    assert total["cost_usd"] == pytest.approx(0.506936) and total["unpriced_jobs"] == 1
    assert total["avg_processing_seconds"] is not None
    assert total["p95_processing_seconds"] is not None
    for by_key, key in (("day", datetime.now(UTC).date().isoformat()), ("assignment", "hw-7"),
                        ("group", "hw-7")):
        items = (await client.get(f"/api/marking/usage?by={by_key}", headers=AUTH)).json()["items"]
        assert [i["key"] for i in items] == [key] and items[0]["jobs"] == 4
    tomorrow = (datetime.now(UTC).date() + timedelta(days=1)).isoformat()
    empty = (await client.get(f"/api/marking/usage?since={tomorrow}&until={tomorrow}",
                              headers=AUTH)).json()
    assert empty["items"] == [] and empty["total"]["jobs"] == 0
    # Each submission above was its own run; the latest run is the unpriced one.
    progress = (await client.get("/api/marking/assignments/hw-7/progress", headers=AUTH)).json()
    assert progress["tokens"] == 11 and progress["prompt_tokens"] == 5
    assert progress["cost_usd"] is None and progress["unpriced_jobs"] == 1


async def test_usage_rejects_bad_queries(client: httpx.AsyncClient):
    for query in ("by=week", "since=yesterday", "since=2026-02-30",
                  "since=2026-03-02&until=2026-03-01", "since=2020-01-01&until=2026-01-01"):
        r = await client.get(f"/api/marking/usage?{query}", headers=AUTH)
        assert r.status_code == 422 and r.json()["error"] == "invalid", query
    assert (await client.get("/api/marking/usage")).status_code == 401


async def test_metrics_needs_a_token_and_its_counters_survive_pruning(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    assert (await client.get("/metrics")).status_code == 401
    subs = await add_submissions(conn, 2, assignment_id="hw-7")
    await marked(client, function, subs[0], 5,
                 {"model": "gpt-x", "prompt_tokens": 1000, "completion_tokens": 500})
    sent = await dispatch(client, function, subs[1])
    fail = {"queue_id": sent["queue_id"], "token": sent["callback_token"], "status": "failed",
            "error": "model_timeout", "retryable": False}
    assert (await client.post("/webhooks/ai-mark", json=fail)).json()["accepted"] == 1

    async def scrape(token: str) -> str:
        r = await client.get("/metrics", headers={"authorization": f"Bearer {token}"})
        assert r.status_code == 200
        return r.text

    before = await scrape("metrics-token-0123456789")
    assert value(before, "aiqueue_jobs_completed_total") == 1
    assert value(before, "aiqueue_jobs_failed_total", error="function:model_timeout") == 1
    assert value(before, "aiqueue_attempts_total", outcome="completed") == 1
    assert value(before, "aiqueue_attempts_total", outcome="callback_failed") == 1
    assert value(before, "aiqueue_tokens_total", model="gpt-x", kind="prompt") == 1000
    assert value(before, "aiqueue_tokens_total", model="gpt-x", kind="completion") == 500
    assert value(before, "aiqueue_cost_usd_total", model="gpt-x") == 0.006
    assert value(before, "aiqueue_processing_seconds_bucket", le="+Inf") == 1
    # Prune every finished row (and fold the deltas): the counters stay.
    await conn.execute("UPDATE ai_marking_queue SET finished_at = now() - interval '30 days'")
    await conn.execute("UPDATE ai_queue_control SET last_prune_at = '-infinity'")
    await conn.execute("SELECT count(*) FROM ai_marking_queue")
    from aiqueue.db.store import queries
    pruned = await conn.fetchval(queries()["prune"], 60.0)
    assert pruned == 1 and await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 1
    after = await scrape(SECRET)
    counters = [line for line in before.splitlines()
                if line.startswith(("aiqueue_jobs", "aiqueue_attempts", "aiqueue_tokens",
                                    "aiqueue_cost", "aiqueue_processing"))]
    assert counters and all(line in after.splitlines() for line in counters)
