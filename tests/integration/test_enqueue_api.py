""" through the real app and a real PostgreSQL: group, remark, Idempotency-Key."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.web.app import create_app
from tests.conftest import (
    AUTH,
    add_submissions,
    app_client,
    make_settings,
)


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    # Paused: nothing is dispatched, the rows stay pending for the assertions.
    app = create_app(make_settings(db_url, function_url="http://127.0.0.1:9/unreachable"))
    async with app_client(app) as c:
        yield c


@pytest.fixture(autouse=True)
async def paused(conn: asyncpg.Connection) -> None:
    await conn.execute("UPDATE ai_queue_control SET paused = true")


async def enqueue(client: httpx.AsyncClient, ids: list[uuid.UUID], key: str | None = None,
                  **extra: Any) -> httpx.Response:
    body = {"assignment_id": "hw-7", "submission_ids": [str(i) for i in ids], **extra}
    headers = {**AUTH, **({"idempotency-key": key} if key is not None else {})}
    return await client.post("/api/marking/enqueue", json=body, headers=headers)


async def mark(conn: asyncpg.Connection, ids: list[uuid.UUID]) -> None:
    await conn.execute("UPDATE submissions SET ai_result = '{\"score\": 1}', ai_marked_at = now() "
                       "WHERE id = ANY($1)", ids)


async def test_marked_submissions_are_left_out_unless_remark(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 4)
    await mark(conn, ids[:3])
    r = await enqueue(client, ids)
    assert r.status_code == 202
    body = r.json()
    assert (body["enqueued"], body["skipped"], body["already_marked"]) == (1, 0, 3)
    again = await enqueue(client, ids, remark=True)
    assert (again.json()["enqueued"], again.json()["skipped"],
            again.json()["already_marked"]) == (3, 1, 0)
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 4


@pytest.mark.parametrize(("extra", "error"), [
    ({"group": ""}, "group"),
    ({"group": "x" * 201}, "group"),
    ({"group": 7}, "group"),
    ({"group": "a\u0000b"}, "group"),
    ({"remark": "yes"}, "remark"),
    ({"remark": 1}, "remark"),
])
async def test_bad_group_or_remark_is_422(client: httpx.AsyncClient, conn: asyncpg.Connection,
                                          extra: dict[str, Any], error: str):
    ids = await add_submissions(conn, 1)
    r = await enqueue(client, ids, **extra)
    assert r.status_code == 422 and error in r.json()["detail"]
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0


async def test_group_is_shown_and_filtered(client: httpx.AsyncClient, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 3)
    await enqueue(client, ids[:2], group="teacher-9")
    await enqueue(client, ids[2:])
    r = await client.get("/api/marking/queue", params={"group": "teacher-9"}, headers=AUTH)
    assert r.status_code == 200
    assert r.json()["total"] == 2
    assert {i["group"] for i in r.json()["items"]} == {"teacher-9"}
    r = await client.get("/api/marking/queue", params={"group": "hw-7"}, headers=AUTH)
    assert r.json()["total"] == 1 and r.json()["items"][0]["group"] == "hw-7"
    bad = await client.get("/api/marking/queue", params={"group": "x" * 201}, headers=AUTH)
    assert bad.status_code == 422


async def test_a_repeated_key_replays_the_first_answer(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 3)
    first = await enqueue(client, ids, key="batch-1")
    assert first.status_code == 202 and "idempotent-replayed" not in first.headers
    # The rows complete meanwhile: without the key this would mark them again.
    await conn.execute("UPDATE ai_marking_queue SET status = 'completed', finished_at = now()")
    again = await enqueue(client, ids, key="batch-1")
    assert again.status_code == 202
    assert again.headers["idempotent-replayed"] == "true"
    # Byte for byte: the stored answer is read back as the type and sent as the first was.
    assert again.content == first.content
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 3


async def test_a_key_with_another_body_is_422(client: httpx.AsyncClient,
                                              conn: asyncpg.Connection):
    ids = await add_submissions(conn, 3)
    assert (await enqueue(client, ids[:2], key="k")).status_code == 202
    r = await enqueue(client, ids, key="k")
    assert r.status_code == 422 and r.json()["error"] == "idempotency_key_reused"
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 2


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "tab\there"])
async def test_a_malformed_key_is_400(client: httpx.AsyncClient, conn: asyncpg.Connection,
                                      key: str):
    ids = await add_submissions(conn, 1)
    headers = {**AUTH, "idempotency-key": key}
    body = {"assignment_id": "hw-7", "submission_ids": [str(ids[0])]}
    r = await client.post("/api/marking/enqueue", json=body,
                          headers={k.encode(): v.encode("utf-8") for k, v in headers.items()})
    assert r.status_code == 400 and r.json()["error"] == "invalid_header"
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0


async def test_a_failed_request_does_not_use_up_its_key(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 2)
    ghost = uuid.uuid4()
    assert (await enqueue(client, [*ids, ghost], key="k1")).status_code == 422
    ok = await enqueue(client, ids, key="k1")
    assert ok.status_code == 202 and ok.json()["enqueued"] == 2


async def test_keys_expire_after_a_day_and_are_pruned(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 2)
    await enqueue(client, ids, key="old")
    await conn.execute("UPDATE ai_marking_queue SET status = 'cancelled', finished_at = now()")
    await conn.execute("UPDATE ai_marking_idempotency SET created_at = now() - interval '25 h'")
    # Expired: the same key is a new request.
    again = await enqueue(client, ids, key="old")
    assert "idempotent-replayed" not in again.headers and again.json()["enqueued"] == 2
    await conn.execute("UPDATE ai_marking_idempotency SET created_at = now() - interval '25 h'")
    await conn.execute("UPDATE ai_queue_control SET last_prune_at = '-infinity'")
    r = await client.get("/api/marking/process-queue", headers=AUTH)
    assert r.status_code == 200
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_idempotency") == 0


async def test_concurrent_duplicates_with_one_key_enqueue_once(
    db_url: str, conn: asyncpg.Connection
):
    # Separate apps (pools) racing on one database, as separate instances would.
    ids = await add_submissions(conn, 200)
    apps = [create_app(make_settings(db_url, function_url="http://127.0.0.1:9/x"))
            for _ in range(4)]
    body = {"assignment_id": "hw-7", "submission_ids": [str(i) for i in ids]}
    try:
        async def post(app: Any) -> httpx.Response:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://app.test") as c:
                return await c.post("/api/marking/enqueue", json=body,
                                    headers={**AUTH, "idempotency-key": "race"})
        answers = await asyncio.gather(*[post(app) for app in apps * 3])
    finally:
        for app in apps:
            await app.state.aiqueue.close()
    assert {a.status_code for a in answers} == {202}
    assert len({a.text for a in answers}) == 1
    assert sum("idempotent-replayed" not in a.headers for a in answers) == 1
    assert answers[0].json()["enqueued"] == 200
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 200
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_attempts") == 0


async def test_enqueue_and_its_replay_log_allowed_fields_only(
    client: httpx.AsyncClient, conn: asyncpg.Connection, caplog: pytest.LogCaptureFixture
):
    ids = await add_submissions(conn, 2)
    await mark(conn, ids[:1])
    with caplog.at_level(logging.INFO, logger="aiqueue"):
        assert (await enqueue(client, ids, key="logged")).status_code == 202
        assert (await enqueue(client, ids, key="logged")).status_code == 202
    events = [json.loads(r.getMessage())["event"] for r in caplog.records
              if r.name == "aiqueue"]
    assert "enqueue" in events and "enqueue_replayed" in events
