"""Flow control through the real app (docs/concepts.md): webhook refusals, stats, metrics."""

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
    app = create_app(make_settings(db_url, max_in_flight=4, tokens_per_minute=60_000,
                                   budget_window_seconds=10, retry_base_seconds=1))
    async with app_client(app) as c:
        yield c


async def test_a_refused_mark_uses_no_attempt_and_the_page_data_say_so(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
) -> None:
    ids = await add_submissions(conn, 3)
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-7", "submission_ids": [str(i) for i in ids]})
    assert r.status_code == 202
    sent = json.loads(function.calls.last.request.content)
    item = {"queue_id": sent["queue_id"], "token": sent["callback_token"], "status": "failed",
            "error": "rate_limited", "retry_after": 120}
    # A malformed retry_after fails the whole batch, and changes nothing.
    bad = await client.post("/webhooks/ai-mark", json=[{**item, "retry_after": 3601}])
    assert bad.status_code == 422 and "retry_after" in bad.json()["detail"]
    assert await conn.fetchval("SELECT status FROM ai_marking_queue WHERE queue_id = $1",
                               uuid.UUID(sent["queue_id"])) == "processing"
    calls = function.call_count
    assert (await client.post("/webhooks/ai-mark", json=[item])).json()["accepted"] == 1
    row = await conn.fetchrow("SELECT status, attempts, last_error FROM ai_marking_queue"
                              " WHERE queue_id = $1", uuid.UUID(sent["queue_id"]))
    assert tuple(row) == ("pending", 0, "rate_limited")
    assert function.call_count == calls  # the whole queue is held: nothing else went out
    stats = (await client.get("/api/marking/stats", headers=AUTH)).json()
    assert stats["hold_until"] is not None and stats["in_flight_limit"] >= 1
    assert stats["tokens_per_minute"] == 60_000 and stats["requests_per_minute"] is None
    assert stats["budget_window_seconds"] == 10
    assert stats["requests_in_window"] == calls and stats["tokens_in_window"] == (calls - 1) * 1000
    metrics = (await client.get("/metrics", headers=AUTH)).text
    assert f"aiqueue_in_flight_limit {stats['in_flight_limit']}" in metrics
    assert 'aiqueue_refusals_total{kind="rate_limited"} 1' in metrics
    assert 'aiqueue_refusals_total{kind="overloaded"} 0' in metrics


async def refuse_the_only_row(db_url: str, conn: asyncpg.Connection, function: Any,
                              error: str, retry_after: float) -> dict[str, Any]:
    """Enqueue one row at in-flight 1 and refuse its dispatch; the dispatch's body.

    No ticker and no cron here, as on a serverless deployment.
    """
    app = create_app(make_settings(db_url, max_in_flight=1))
    ids = await add_submissions(conn, 1)
    async with app_client(app) as client:
        await client.post("/api/marking/enqueue", headers=AUTH, json={
            "assignment_id": "hw-7", "submission_ids": [str(ids[0])]})
        assert function.call_count == 1
        sent: dict[str, Any] = json.loads(function.calls.last.request.content)
        refused = {"queue_id": sent["queue_id"], "token": sent["callback_token"],
                   "status": "failed", "error": error, "retry_after": retry_after}
        r = await client.post("/webhooks/ai-mark", json=[refused])  # returns after its tasks
        assert r.json()["accepted"] == 1
    return sent


async def test_a_short_hold_is_waited_out_in_the_same_invocation(
    db_url: str, conn: asyncpg.Connection, function: Any
) -> None:
    # The webhook's step after answering waits out the 1 s hold and dispatches again.
    sent = await refuse_the_only_row(db_url, conn, function, "overloaded", 1)
    assert function.call_count == 2
    again = json.loads(function.calls.last.request.content)
    assert (again["queue_id"], again["attempt"]) == (sent["queue_id"], 1)


async def test_a_hold_longer_than_an_invocation_may_wait_is_left_to_the_cron(
    db_url: str, conn: asyncpg.Connection, function: Any
) -> None:
    await refuse_the_only_row(db_url, conn, function, "rate_limited", 60)
    assert function.call_count == 1
