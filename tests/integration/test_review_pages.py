"""Review and cost on /ai-queue: the row page's review state and actions, the cost card."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed
from aiqueue.settings import ModelPrice
from aiqueue.web.app import create_app
from tests.conftest import SECRET, add_submissions, make_settings
from tests.plans import plan_of


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings(db_url, model_prices={"gpt-x": ModelPrice(2.0, 8.0)}))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://app.test") as c:
        yield c
    await app.state.aiqueue.close()


async def login(client: httpx.AsyncClient) -> str:
    await client.post("/ai-queue/login", data={"password": SECRET, "next": "/ai-queue"})
    page = await client.get("/ai-queue")
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found
    return found.group(1)


async def completed(db_url: str, conn: asyncpg.Connection, usage: dict[str, Any]) -> str:
    store = Store(await connect_pool(db_url, max_size=2))
    try:
        [sub] = await add_submissions(conn, 1, content="secret-answer-words")
        await store.enqueue([sub], "hw-p", 0, {})
        job = await store.claim(plan_of(0, 5))
        assert job is not None
        result = {"score": 2, "feedback": "quotes secret-answer-words"}
        await store.complete(Completed(job.queue_id, job.dispatch_seq, result,
                                       {**usage, "cost_usd": 0.25}), plan_of())
        return str(job.queue_id)
    finally:
        await store.close()


async def test_row_page_review_state_and_actions_record_the_login(
    client: httpx.AsyncClient, conn: asyncpg.Connection, db_url: str
):
    q = await completed(db_url, conn, {"model": "gpt-x", "prompt_tokens": 10})
    csrf = await login(client)
    page = (await client.get(f"/ai-queue/rows/{q}")).text
    assert '<dd id="review">unreviewed</dd>' in page and 'data-review="revert"' in page
    back = f"/ai-queue/rows/{q}"
    r = await client.post(f"/ai-queue/rows/{q}/review", data={
        "csrf_token": csrf, "back": back, "review_action": "accept"})
    assert r.status_code == 303
    page = (await client.get(r.headers["location"])).text
    assert "result is accepted" in page and "accepted by admin at" in page
    r = await client.post(f"/ai-queue/rows/{q}/review", data={
        "csrf_token": csrf, "back": back, "review_action": "revert"})
    page = (await client.get(r.headers["location"])).text
    assert "reverted by admin at" in page and 'data-review="revert"' not in page
    # The history lists both actions with the operator's login.
    assert re.search(r"<td>accept</td>.*?<td>admin</td>", page, re.S)
    assert re.search(r"<td>revert</td>.*?<td>admin</td>", page, re.S)
    r = await client.post(f"/ai-queue/rows/{q}/review", data={
        "csrf_token": csrf, "back": back, "review_action": "revert"})
    assert "no applied result to review" in (await client.get(r.headers["location"])).text
    assert "secret-answer-words" not in page
    row = await conn.fetchrow("SELECT review, actor FROM ai_marking_results")
    assert dict(row) == {"review": "reverted", "actor": "admin"}


async def test_cost_card_today_month_and_by_model(
    client: httpx.AsyncClient, conn: asyncpg.Connection, db_url: str
):
    await completed(db_url, conn, {"model": "gpt-x", "prompt_tokens": 100,
                                   "completion_tokens": 20})
    await login(client)
    html = (await client.get("/ai-queue/fragment?part=chart")).text
    cells = re.findall(r'<tr data-cost="\d+"><td>([^<]*)</td><td class="num">([^<]*)</td>\s*'
                       r'<td class="num">([^<]*)</td><td class="num">([^<]*)</td>', html)
    assert cells == [("Today", "$0.2500", "120", "1"),
                     ("Last 30 days", "$0.2500", "120", "1"),
                     ("Model: gpt-x", "$0.2500", "120", "1")]
    assert "secret-answer-words" not in html
    assert json.loads(await conn.fetchval("SELECT usage::text FROM ai_marking_queue"))[
        "cost_usd"] == 0.25
