"""The estimate before Mark All: `dry_run` on the enqueue, through the real app."""

from __future__ import annotations

import random
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.db.store import Store
from aiqueue.models import Completed
from aiqueue.settings import ModelPrice
from aiqueue.web.app import create_app
from tests.conftest import AUTH, add_submissions, app_client, make_settings
from tests.plans import plan_of


@pytest.fixture(autouse=True)
async def paused(conn: asyncpg.Connection) -> None:
    # Nothing is dispatched by the app: the test runs the model itself.
    await conn.execute("UPDATE ai_queue_control SET paused = true")


async def dry_run(client: httpx.AsyncClient, ids: list[uuid.UUID], **extra: Any
                  ) -> httpx.Response:
    body = {"assignment_id": "essay-1", "submission_ids": [str(i) for i in ids],
            "dry_run": True, **extra}
    return await client.post("/api/marking/enqueue", json=body, headers=AUTH)


async def _mark_run(store: Store, conn: asyncpg.Connection, ids: list[uuid.UUID],
                    rng: random.Random) -> int:
    """Enqueue and mark the rows as a model would; the tokens they used."""
    await conn.execute("UPDATE ai_queue_control SET paused = false")
    await store.enqueue(ids, "essay-1", 0, {})
    used = 0
    while (job := await store.claim(plan_of(1, 5))) is not None:
        prompt, completion = rng.randint(600, 1400), rng.randint(150, 350)
        used += prompt + completion
        await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1},
                                       {"model": "m", "prompt_tokens": prompt,
                              "completion_tokens": completion}), plan_of())
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    return used


async def test_a_dry_run_writes_nothing_and_says_what_a_run_would_use(
        db_url: str, conn: asyncpg.Connection, store: Store):
    app = create_app(make_settings(db_url, function_url="http://127.0.0.1:9/unreachable"))
    ids = await add_submissions(conn, 30, assignment_id="essay-1")
    await conn.execute("UPDATE submissions SET ai_marked_at = now() WHERE id = $1", ids[0])
    before = await conn.fetchval("SELECT count(*) FROM ai_marking_queue")
    async with app_client(app) as client:
        r = await dry_run(client, ids)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"rows", "already_marked", "estimated_tokens", "estimated_cost_usd",
                         "eta_seconds", "capped", "same_answers"}
    assert body["same_answers"] == 0  # 30 different answers
    # Nothing ran yet: the default estimate, no price, no cap.
    assert (body["rows"], body["already_marked"]) == (29, 1)
    assert body["estimated_tokens"] == 29 * 1000
    assert body["estimated_cost_usd"] is None and body["capped"] is None
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == before


async def test_after_a_first_run_the_estimate_is_within_30_percent(
        db_url: str, conn: asyncpg.Connection, store: Store):
    rng = random.Random(30)
    await _mark_run(store, conn, await add_submissions(conn, 40, assignment_id="essay-1"), rng)
    app = create_app(make_settings(db_url, function_url="http://127.0.0.1:9/unreachable"))
    nxt = await add_submissions(conn, 100, assignment_id="essay-1")
    async with app_client(app) as client:
        body = (await dry_run(client, nxt)).json()
    used = await _mark_run(store, conn, nxt, rng)
    assert body["rows"] == 100
    assert body["estimated_tokens"] == pytest.approx(used, rel=0.30), (body, used)
    assert body["eta_seconds"] is not None


async def test_a_run_that_would_reach_a_cap_says_which(
        db_url: str, conn: asyncpg.Connection, store: Store):
    rng = random.Random(7)
    await _mark_run(store, conn, await add_submissions(conn, 10, assignment_id="essay-1"), rng)
    # A row costs about 1000 × $1 + 250 × $4 per 1M tokens: $0.002; 100 rows $0.20.
    settings = make_settings(db_url, function_url="http://127.0.0.1:9/unreachable",
                             group_usd_per_hour=0.05, group_usd_per_day=10.0,
                             model_prices={"m": ModelPrice(1.0, 4.0)})
    app = create_app(settings)
    nxt = await add_submissions(conn, 100, assignment_id="essay-1")
    async with app_client(app) as client:
        body = (await dry_run(client, nxt)).json()
    assert body["estimated_cost_usd"] == pytest.approx(0.2, rel=0.3)
    assert body["capped"] == {"group_usd_per_hour": 0.05}
