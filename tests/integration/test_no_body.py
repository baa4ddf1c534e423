"""Routes that take no body refuse one (422 naming its fields) and change nothing; an
empty body and `{}` still act (docs/integrating.md, "Bodies are strict")."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.web.app import create_app
from tests.conftest import AUTH, add_submissions, app_client, make_settings


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(create_app(make_settings(db_url, max_in_flight=0))) as c:
        yield c


async def _dispatched(client: httpx.AsyncClient, function: Any, sub: uuid.UUID,
                      assignment: str) -> dict[str, Any]:
    r = await client.post("/api/marking/enqueue", headers=AUTH,
                          json={"assignment_id": assignment, "submission_ids": [str(sub)]})
    assert r.status_code == 202
    sent: dict[str, Any] = json.loads(function.calls.last.request.content)
    return sent


async def _answer(client: httpx.AsyncClient, sent: dict[str, Any], **item: Any) -> None:
    body = {"queue_id": sent["queue_id"], "token": sent["callback_token"], **item}
    assert (await client.post("/webhooks/ai-mark", json=[body])).json()["accepted"] == 1


async def _rows(client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
                ) -> dict[str, str]:
    """A completed row (hw-done), a failed one (hw-failed), one in flight (hw-live)."""
    [done] = await add_submissions(conn, 1, assignment_id="hw-done")
    [failed] = await add_submissions(conn, 1, assignment_id="hw-failed")
    [live] = await add_submissions(conn, 1, assignment_id="hw-live")
    completed = await _dispatched(client, function, done, "hw-done")
    await _answer(client, completed, status="completed",
                  result={"score": 3, "max_score": 5, "feedback": "f"})
    refused = await _dispatched(client, function, failed, "hw-failed")
    await _answer(client, refused, status="failed", error="bad_input", retryable=False)
    in_flight = await _dispatched(client, function, live, "hw-live")
    return {"done": completed["queue_id"], "done_sub": str(done),
            "failed": refused["queue_id"], "live": in_flight["queue_id"]}


# Every route that takes no body, with what its answer to an empty body is.
ROUTES = [
    ("POST", "/api/marking/rows/{live}/cancel", 200),
    ("POST", "/api/marking/queue/{failed}/retry", 200),
    ("POST", "/api/marking/queue/{done}/revert", 200),
    ("POST", "/api/marking/assignments/hw-done/accept", 200),
    ("POST", "/api/marking/assignments/hw-done/revert", 200),
    ("POST", "/api/marking/assignments/hw-live/cancel", 200),
    ("POST", "/api/marking/runs/{run}/release", 404),
    ("DELETE", "/api/marking/submissions/{done_sub}", 200),
]

SNAPSHOT = """
    SELECT coalesce(jsonb_agg(to_jsonb(q) ORDER BY to_jsonb(q)::text), '[]')::text
    FROM ai_marking_queue q
    UNION ALL
    SELECT coalesce(jsonb_agg(to_jsonb(s) ORDER BY to_jsonb(s)::text), '[]')::text
    FROM submissions s
"""


async def _snapshot(conn: asyncpg.Connection) -> list[str]:
    return [r[0] for r in await conn.fetch(SNAPSHOT)]


@pytest.mark.parametrize(("method", "path", "ok"), ROUTES)
async def test_a_route_without_a_body_refuses_one_and_changes_nothing(
        client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any,
        method: str, path: str, ok: int):
    url = path.format(run=uuid.uuid4(), **await _rows(client, conn, function))
    before = await _snapshot(conn)
    for body, named in (({"dry_run": True}, "dry_run"), ({"x": 1, "b": 2}, "b, x"),
                        ([], "no body"), ("yes", "no body"), (None, "no body")):
        r = await client.request(method, url, content=json.dumps(body), headers=AUTH)
        assert r.status_code == 422, (url, body, r.text)
        assert r.json()["error"] == "invalid" and named in r.json()["detail"]
    wrong = await client.request(method, url, content=b"{nope", headers=AUTH)
    assert wrong.status_code == 400
    # Credentials first: a body does not tell a stranger anything.
    assert (await client.request(method, url, json={"x": 1})).status_code == 401
    assert await _snapshot(conn) == before
    empty = await client.request(method, url, json={}, headers=AUTH)
    assert empty.status_code == ok, (url, empty.text)


@pytest.mark.parametrize(("method", "path", "ok"), ROUTES)
async def test_no_body_at_all_is_fine(client: httpx.AsyncClient, conn: asyncpg.Connection,
                                      function: Any, method: str, path: str, ok: int):
    url = path.format(run=uuid.uuid4(), **await _rows(client, conn, function))
    r = await client.request(method, url, headers=AUTH)
    assert r.status_code == ok, (url, r.text)
