"""One row from the outside: detail, cancel, an operator's fail."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.web.app import create_app
from tests.conftest import AUTH, SECRET, add_submissions, app_client, make_settings


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(create_app(make_settings(db_url))) as c:
        yield c


async def enqueue(client: httpx.AsyncClient, ids: list[uuid.UUID]) -> list[str]:
    body = {"assignment_id": "hw-1", "submission_ids": [str(i) for i in ids]}
    r = await client.post("/api/marking/enqueue", json=body, headers=AUTH)
    assert r.status_code == 202
    queue_ids: list[str] = r.json()["queue_ids"]
    return queue_ids


def sent(function: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(function.calls.last.request.content)
    return body


async def test_a_rows_detail_has_its_attempts_and_results_status_and_no_content(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    ids = await add_submissions(conn, 1, content="the secret essay")
    [queue_id] = await enqueue(client, ids)
    first = sent(function)
    item = {"queue_id": queue_id, "token": first["callback_token"], "status": "completed",
            "result": {"score": 7, "max_score": 10, "feedback": "lovely prose"},
            "usage": {"model": "gpt-x", "prompt_tokens": 3, "completion_tokens": 4}}
    assert (await client.post("/webhooks/ai-mark", json=item)).json()["accepted"] == 1
    r = await client.get(f"/api/marking/rows/{queue_id}", headers=AUTH)
    assert r.status_code == 200
    body = r.json()
    listed = (await client.get("/api/marking/queue", headers=AUTH)).json()["items"][0]
    assert {k: body[k] for k in listed} == listed  # the row as the queue list shows it
    assert body["status"] == "completed" and body["attempts"] == 1
    [line] = body["history"]
    assert line["kind"] == "dispatch" and line["outcome"] == "completed"
    assert line["error"] is None and line["duration_seconds"] >= 0
    assert body["result"]["review"] == "unreviewed" and body["result"]["model"] == "gpt-x"
    assert body["result"]["superseded"] is False
    assert "secret" not in r.text and "lovely" not in r.text and "score" not in r.text


async def test_auth_404_and_422(client: httpx.AsyncClient, conn: asyncpg.Connection,
                                function: Any):
    ghost = uuid.uuid4()
    for method, path, body in (("GET", "", None), ("POST", "/cancel", None),
                               ("POST", "/fail", {"note": "n"})):
        url = f"/api/marking/rows/{ghost}{path}"
        assert (await client.request(method, url, json=body)).status_code == 401
        wrong = {"authorization": "Bearer wrong"}
        assert (await client.request(method, url, json=body, headers=wrong)).status_code == 401
        r = await client.request(method, url, json=body, headers=AUTH)
        assert r.status_code == 404 and r.json()["error"] == "not_found"
        bad = await client.request(method, f"/api/marking/rows/nope{path}", json=body,
                                   headers=AUTH)
        assert bad.status_code == 422


async def test_cancel_a_pending_row_then_409(client: httpx.AsyncClient,
                                             conn: asyncpg.Connection, function: Any):
    ids = await add_submissions(conn, 2)
    _, second = await enqueue(client, ids)  # cap 1: the first is processing
    r = await client.post(f"/api/marking/rows/{second}/cancel", headers=AUTH)
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "cancelled" and body["queue_id"] == second
    assert body["history"][-1] == {**body["history"][-1], "kind": "action", "outcome": "cancel"}
    again = await client.post(f"/api/marking/rows/{second}/cancel", headers=AUTH)
    assert again.status_code == 409 and "cancelled" in again.json()["detail"]


async def test_cancel_a_processing_row_refuses_its_late_result_and_frees_its_slot(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    ids = await add_submissions(conn, 2)
    first, second = await enqueue(client, ids)
    out = sent(function)
    assert out["queue_id"] == first
    r = await client.post(f"/api/marking/rows/{first}/cancel", headers=AUTH)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert r.json()["history"][0]["outcome"] == "cancelled"
    # The slot went to the next row.
    assert function.call_count == 2 and sent(function)["queue_id"] == second
    late = {"queue_id": first, "token": out["callback_token"], "status": "completed",
            "result": {"score": 1}}
    assert (await client.post("/webhooks/ai-mark", json=late)).json()["accepted"] == 0
    mark = await conn.fetchval("SELECT ai_result FROM submissions WHERE id = $1", ids[0])
    assert mark is None
    status = await conn.fetchval("SELECT status FROM ai_marking_queue WHERE queue_id = $1",
                                 uuid.UUID(first))
    assert status == "cancelled"


async def test_an_operator_fails_a_pending_row_with_a_note(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    ids = await add_submissions(conn, 2)
    first, second = await enqueue(client, ids)
    url = f"/api/marking/rows/{second}/fail"
    for body in ({"note": "x", "reason": "y"}, {}, {"note": ""}, {"note": "n" * 201},
                 {"note": 3}, {"note": "a\nb"}):
        r = await client.post(url, json=body, headers=AUTH)
        assert r.status_code == 422, body
    unknown = await client.post(url, json={"note": "x", "reason": "y"}, headers=AUTH)
    assert "reason" in unknown.json()["detail"]
    assert await conn.fetchval("SELECT status FROM ai_marking_queue WHERE queue_id = $1",
                               uuid.UUID(second)) == "pending"
    r = await client.post(url, json={"note": "duplicate upload"}, headers=AUTH)
    assert r.status_code == 200
    assert r.json()["status"] == "failed"
    # The note stays with operators: last_error is the code, the note is in /ai-queue's history.
    assert r.json()["last_error"] == "operator"
    assert "duplicate upload" not in r.text
    listed = (await client.get("/api/marking/queue?status=failed", headers=AUTH)).text
    assert '"last_error":"operator"' in listed and "duplicate upload" not in listed
    event = await conn.fetchval(
        "SELECT body::text FROM ai_marking_outbox WHERE type = 'marking.row_failed'")
    assert json.loads(event)["error"] == "operator" and "duplicate" not in event
    r = await client.post("/ai-queue/login", data={"password": SECRET, "next": "/ai-queue"})
    assert r.status_code == 303
    page = (await client.get(f"/ai-queue/rows/{second}")).text
    assert '<small class="note">note: duplicate upload</small>' in page
    # Only a pending row: a processing one and an ended one are 409.
    for queue_id in (first, second):
        r = await client.post(f"/api/marking/rows/{queue_id}/fail", json={"note": "n"},
                              headers=AUTH)
        assert r.status_code == 409
    failed = await conn.fetchval(
        "SELECT count(*) FROM ai_marking_outbox WHERE type = 'marking.row_failed'")
    assert failed == 1
