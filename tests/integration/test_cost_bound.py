"""A result's cost_usd above 1,000 or not finite is refused for cost; the result applies
(docs/concepts.md)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.settings import ModelPrice
from aiqueue.web.app import create_app
from tests.conftest import AUTH, add_submissions, app_client, make_settings


@pytest.fixture(params=["no money", "a spend cap"])
async def client(request: pytest.FixtureRequest, db_url: str
                 ) -> AsyncIterator[httpx.AsyncClient]:
    # With a cap, each result's cost is added to the spend windows (float8 sums).
    money: dict[str, Any] = {} if request.param == "no money" else {
        "group_usd_per_day": 10_000.0, "model_prices": {"m": ModelPrice(1.0, 4.0)}}
    async with app_client(create_app(make_settings(db_url, **money))) as c:
        yield c


async def test_two_results_costing_1e308_both_apply_and_nothing_overflows(
        client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any) -> None:
    ids = await add_submissions(conn, 2)
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-c", "submission_ids": [str(i) for i in ids]})
    assert r.status_code == 202
    for _ in ids:
        sent = json.loads(function.calls.last.request.content)
        item = {"queue_id": sent["queue_id"], "token": sent["callback_token"],
                "status": "completed", "result": {"score": 1},
                "usage": {"model": "m", "prompt_tokens": 3, "completion_tokens": 4,
                          "cost_usd": 1e308}}
        answer = await client.post("/webhooks/ai-mark", json=[item])
        assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text
    assert await conn.fetchval("SELECT count(*) FROM submissions WHERE ai_marked_at IS NOT NULL "
                               "AND id = ANY($1::uuid[])", ids) == 2
    # The cost sent was refused: no result carries it, and the totals stay finite.
    costs = await conn.fetch("SELECT cost_usd FROM ai_marking_results")
    assert len(costs) == 2 and all(c["cost_usd"] is None or c["cost_usd"] < 1000 for c in costs)
    usage = (await client.get("/api/marking/usage", headers=AUTH))
    assert usage.status_code == 200, usage.text
    assert "Infinity" not in usage.text
