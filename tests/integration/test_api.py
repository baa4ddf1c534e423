"""The JSON API through the real app and a real PostgreSQL; the function mocked with respx."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
import respx

from aiqueue.tokens import Tokens
from aiqueue.web.app import create_app
from tests.conftest import (
    AUTH,
    FN,
    add_submissions,
    app_client,
    make_settings,
)
from tests.prom import value


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings(db_url, cron_secrets=("cron-secret-0123456789",)))
    async with app_client(app) as c:
        yield c


async def enqueue(client: httpx.AsyncClient, ids: list[uuid.UUID], **extra: Any) -> httpx.Response:
    body = {"assignment_id": "hw-7", "submission_ids": [str(i) for i in ids], **extra}
    return await client.post("/api/marking/enqueue", json=body, headers=AUTH)


async def test_enqueue_answers_202_and_kicks_one_dispatch(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    ids = await add_submissions(conn, 3)
    r = await enqueue(client, ids + ids[:1], payload={"rubric": "r", "max_score": 10})
    assert r.status_code == 202
    body = r.json()
    assert body["enqueued"] == 3 and body["skipped"] == 1 and len(body["queue_ids"]) == 3
    assert function.call_count == 1  # the kick after answering, cap 1
    sent = json.loads(function.calls.last.request.content)
    assert sent["payload"] == {"rubric": "r", "max_score": 10}
    again = await enqueue(client, ids)
    assert again.json() == {"enqueued": 0, "skipped": 3, "already_marked": 0, "queue_ids": []}


async def test_enqueue_with_unknown_ids_is_422_and_enqueues_nothing(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    ids = await add_submissions(conn, 2)
    ghost = uuid.uuid4()
    r = await enqueue(client, [*ids, ghost])
    assert r.status_code == 422
    assert r.json()["error"] == "invalid" and r.json()["unknown_ids"] == [str(ghost)]
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0


@pytest.mark.parametrize(("body", "status"), [
    (b"not json", 400),
    (b'{"assignment_id": "a", "submission_ids": "x"}', 422),
    (b'{"assignment_id": "", "submission_ids": ["00000000-0000-0000-0000-000000000001"]}', 422),
    (b'{"assignment_id": "a", "submission_ids": ["nope"]}', 422),
    (b'{"assignment_id": "a", "submission_ids": []}', 422),
    (b'{"assignment_id": "a", "submission_ids": ["00000000-0000-0000-0000-000000000001"],'
     b' "priority": "high"}', 422),
    (b'{"assignment_id": "a", "submission_ids": ["00000000-0000-0000-0000-000000000001"],'
     b' "payload": [1]}', 422),
    (b"[]", 422),
])
async def test_bad_enqueue_bodies(client: httpx.AsyncClient, conn: asyncpg.Connection,
                                  body: bytes, status: int):
    r = await client.post("/api/marking/enqueue", content=body, headers=AUTH)
    assert r.status_code == status
    assert set(r.json()) >= {"error", "detail"}
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0


async def test_enqueue_limits(client: httpx.AsyncClient, conn: asyncpg.Connection):
    ids = [str(uuid.uuid4()) for _ in range(10_001)]
    r = await client.post("/api/marking/enqueue", headers=AUTH,
                          json={"assignment_id": "a", "submission_ids": ids})
    assert r.status_code == 422
    big = {"assignment_id": "a", "submission_ids": ids[:1], "payload": {"x": "y" * 70_000}}
    assert (await client.post("/api/marking/enqueue", headers=AUTH, json=big)).status_code == 422
    huge = b'{"x": "' + b"y" * (2 * 1024 * 1024) + b'"}'
    assert (await client.post("/api/marking/enqueue", headers=AUTH,
                              content=huge)).status_code == 413
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0


async def test_credentials(client: httpx.AsyncClient):
    assert (await client.post("/api/marking/enqueue", json={})).status_code == 401
    wrong = {"authorization": "Bearer wrong"}
    assert (await client.post("/api/marking/process-queue", headers=wrong)).status_code == 401
    cron = {"authorization": "Bearer cron-secret-0123456789"}
    assert (await client.post("/api/marking/process-queue", headers=cron)).status_code == 401
    r = await client.get("/api/marking/process-queue", headers=cron)
    assert r.status_code == 200
    assert r.json() == {"claimed": None, "dispatched": False, "recovered": 0, "pruned": 0,
                        "chained": False}
    assert (await client.get("/api/marking/stats")).status_code == 401
    assert (await client.delete("/api/marking/enqueue", headers=AUTH)).status_code == 405
    assert (await client.get("/api/nope", headers=AUTH)).json()["error"] == "not_found"


async def test_full_cycle_through_the_webhook(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    ids = await add_submissions(conn, 2)
    await enqueue(client, ids)
    first = json.loads(function.calls.last.request.content)
    item = {"queue_id": first["queue_id"], "token": first["callback_token"],
            "status": "completed", "result": {"score": 7, "max_score": 10, "feedback": "f"},
            "usage": {"model": "m", "prompt_tokens": 3, "completion_tokens": 4}}
    r = await client.post("/webhooks/ai-mark", json=[item])
    assert r.json() == {"accepted": 1, "ignored": 0, "rejected": 0}
    # The webhook dispatched the next row itself.
    assert function.call_count == 2
    second = json.loads(function.calls.last.request.content)
    assert second["queue_id"] != first["queue_id"]
    dup = await client.post("/webhooks/ai-mark", json=item)
    assert dup.json() == {"accepted": 0, "ignored": 1, "rejected": 0}
    forged = {**item, "queue_id": second["queue_id"]}
    assert (await client.post("/webhooks/ai-mark", json=[forged])).status_code == 401
    mixed = [forged, {"queue_id": second["queue_id"], "token": second["callback_token"],
                      "status": "progress", "progress": {"current": 1, "total": 2}}]
    assert (await client.post("/webhooks/ai-mark", json=mixed)).json() == {
        "accepted": 1, "ignored": 0, "rejected": 1}
    row = await conn.fetchrow("SELECT ai_result FROM submissions WHERE id = $1",
                              uuid.UUID(first["submission_id"]))
    assert json.loads(row["ai_result"])["score"] == 7
    stats = (await client.get("/api/marking/stats", headers=AUTH)).json()
    assert stats["completed"] == 1 and stats["processing"] == 1 and stats["pending"] == 0


async def test_failed_callback_retries_then_fails_and_manual_retry(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    ids = await add_submissions(conn, 1)
    await enqueue(client, ids)
    for attempt in (1, 2, 3):
        sent = json.loads(function.calls.last.request.content)
        assert sent["attempt"] == attempt
        item = {"queue_id": sent["queue_id"], "token": sent["callback_token"],
                "status": "failed", "error": "The student's essay text here"}
        assert (await client.post("/webhooks/ai-mark", json=item)).json()["accepted"] == 1
    qid = sent["queue_id"]
    listing = (await client.get("/api/marking/queue?status=failed", headers=AUTH)).json()
    assert listing["total"] == 1
    assert listing["items"][0]["last_error"] == "function_failed"
    assert listing["items"][0]["attempts"] == 3
    r = await client.post(f"/api/marking/queue/{qid}/retry", headers=AUTH)
    assert r.status_code == 200 and r.json() == {"queue_id": qid, "status": "pending"}
    assert (await client.post(f"/api/marking/queue/{qid}/retry", headers=AUTH)).status_code == 409
    missing = await client.post(f"/api/marking/queue/{uuid.uuid4()}/retry", headers=AUTH)
    assert missing.status_code == 404
    assert (await client.post("/api/marking/queue/not-a-uuid/retry",
                              headers=AUTH)).status_code == 404


async def test_non_retryable_failure_fails_at_once(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    ids = await add_submissions(conn, 1)
    await enqueue(client, ids)
    sent = json.loads(function.calls.last.request.content)
    item = {"queue_id": sent["queue_id"], "token": sent["callback_token"], "status": "failed",
            "error": "invalid_input", "retryable": False}
    await client.post("/webhooks/ai-mark", json=[item])
    row = await conn.fetchrow("SELECT status, last_error FROM ai_marking_queue")
    assert (row["status"], row["last_error"]) == ("failed", "function:invalid_input")


async def test_a_batch_of_results_refills_every_slot_it_frees(
    db_url: str, conn: asyncpg.Connection
):
    app = create_app(make_settings(db_url, max_in_flight=2))
    ids = await add_submissions(conn, 4)
    with respx.mock() as mock:
        chain = mock.post("http://app.test/api/marking/process-queue").mock(
            return_value=httpx.Response(200, json={}))
        function = mock.post(FN).mock(return_value=httpx.Response(202))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://app.test") as client:
            await enqueue(client, ids)  # claims one and chains (mocked here) for the other
            await client.post("/api/marking/process-queue", headers=AUTH)  # what it would do
            assert function.call_count == 2 and chain.call_count == 1
            sent = [json.loads(c.request.content) for c in function.calls]
            batch = [{"queue_id": j["queue_id"], "token": j["callback_token"],
                      "status": "completed", "result": {"score": 1}} for j in sent]
            r = await client.post("/webhooks/ai-mark", json=batch)
            assert r.json() == {"accepted": 2, "ignored": 0, "rejected": 0}
    await app.state.aiqueue.close()
    # The batch's one statement claimed a row for each slot its results freed (the
    # third and the fourth), and both went out: nothing was left to chain for.
    assert function.call_count == 4 and chain.call_count == 1
    statuses = await conn.fetch("SELECT status, count(*) AS n FROM ai_marking_queue "
                                "GROUP BY status")
    assert {r["status"]: r["n"] for r in statuses} == {"completed": 2, "processing": 2}


async def test_sync_mode_applies_the_answer_after_responding(db_url: str, conn: asyncpg.Connection):
    app = create_app(make_settings(db_url, function_mode="sync"))
    ids = await add_submissions(conn, 1)
    with respx.mock(assert_all_called=False) as mock:
        mock.post("http://app.test/api/marking/process-queue").mock(
            return_value=httpx.Response(200, json={}))
        mock.post(FN).mock(return_value=httpx.Response(200, json={
            "status": "completed", "result": {"score": 3, "max_score": 5, "feedback": "x"}}))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://app.test") as client:
            await enqueue(client, ids)
    await app.state.aiqueue.close()
    row = await conn.fetchrow("SELECT status FROM ai_marking_queue")
    assert row["status"] == "completed"
    assert await conn.fetchval("SELECT ai_result->>'score' FROM submissions") == "3"


async def test_tokens_from_another_secret_are_rejected(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    ids = await add_submissions(conn, 1)
    await enqueue(client, ids)
    sent = json.loads(function.calls.last.request.content)
    forged = Tokens("not-the-secret-0123456789").callback(uuid.UUID(sent["queue_id"]), 1, 1)
    item = {"queue_id": sent["queue_id"], "token": forged, "status": "completed",
            "result": {"score": 1}}
    assert (await client.post("/webhooks/ai-mark", json=item)).status_code == 401
    assert await conn.fetchval("SELECT status FROM ai_marking_queue") == "processing"


async def test_healthz_and_metrics(client: httpx.AsyncClient):
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/healthz", headers=AUTH)).json()["database"] is True
    assert (await client.get("/metrics")).status_code == 401
    text = (await client.get("/metrics", headers=AUTH)).text
    assert value(text, "aiqueue_queue_rows", status="pending") == 0
    assert value(text, "aiqueue_jobs_completed_total") == 0
    assert value(text, "aiqueue_processing_seconds_bucket", le="+Inf") == 0
