"""The batch lane through the app's HTTP API: enqueue with a lane and a deadline, the cron."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.batch.function import FunctionModeError, FunctionModes
from aiqueue.db.store import Store, connect_pool
from aiqueue.dev import demo
from aiqueue.web.app import create_app
from functions.ai_mark.server import create_app as create_function
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.batchapi.common import Behaviour, Clock
from tests.conftest import AUTH, add_submissions, app_client, make_settings
from tests.e2e.servers import free_port, run_asgi
from tests.integration.batch_kit import FN_TOKEN, lane_settings, served, soon
from tests.integration.page_kit import PAGE, login

pytestmark = pytest.mark.e2e
SIGNING = "whsec_" + base64.b64encode(b"s" * 32).decode()
OTHER_SIGNING = "whsec_" + base64.b64encode(b"o" * 32).decode()


@pytest.fixture
async def lane(db_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Any, Clock]]:
    clock: Clock = Clock()
    fates: dict[int, Behaviour] = {}
    with served("openai", clock, fates) as (emu, emu_url, fn_url):
        # The chain's self-request goes nowhere: the test drives the cron itself.
        nowhere = f"http://127.0.0.1:{free_port()}"
        settings = lane_settings("openai", db_url, emu, emu_url, fn_url,
                                 app_base_url=nowhere)
        async with app_client(create_app(settings)) as client:
            yield client, emu, clock


async def enqueue(client: httpx.AsyncClient, ids: list[uuid.UUID], **extra: Any
                  ) -> httpx.Response:
    body = {"assignment_id": "hw-n", "submission_ids": [str(i) for i in ids], **extra}
    return await client.post("/api/marking/enqueue", json=body, headers=AUTH)


async def test_enqueue_on_the_batch_lane_then_the_cron_marks_it(
        lane: tuple[httpx.AsyncClient, Any, Clock], conn: asyncpg.Connection) -> None:
    client, emu, clock = lane
    ids = await add_submissions(conn, 5, "hw-n")
    r = await enqueue(client, ids, lane="batch", deadline=soon(6 * 3600).isoformat(),
                      payload={"rubric": "- chlorophyll", "max_score": 4})
    assert r.status_code == 202 and r.json()["enqueued"] == 5
    cron = await client.get("/api/marking/process-queue", headers=AUTH)
    assert cron.status_code == 200 and cron.json()["claimed"] is None  # not live
    lanes = await conn.fetch("SELECT lane, status, deadline FROM ai_marking_queue")
    assert {(r["lane"], r["status"]) for r in lanes} == {("batch", "processing")}
    clock.advance(2)
    # The next cron comes after the batch's look-again time (30 s): skip the wait.
    await conn.execute("UPDATE ai_marking_batches SET look_after = now()")
    assert (await client.get("/api/marking/process-queue", headers=AUTH)).status_code == 200
    statuses = {r["status"] for r in await conn.fetch("SELECT status FROM ai_marking_queue")}
    assert statuses == {"completed"}
    assert emu.held() == {"files": [], "open_batches": []}


@pytest.mark.parametrize("extra, detail", [
    ({"lane": "overnight"}, "lane must be"),
    ({"lane": "batch", "deadline": "tomorrow"}, "RFC 3339"),
    ({"lane": "batch", "deadline": "2001-01-01T00:00:00Z"}, "in the future"),
    ({"deadline": "2099-01-01T00:00:00Z"}, "batch"),
])
async def test_bad_lanes_and_deadlines_are_refused(
        lane: tuple[httpx.AsyncClient, Any, Clock], conn: asyncpg.Connection,
        extra: dict[str, Any], detail: str) -> None:
    client, _, _ = lane
    ids = await add_submissions(conn, 1, "hw-n")
    r = await enqueue(client, ids, **extra)
    assert r.status_code == 422 and detail in r.json()["detail"]
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0


async def test_a_pool_without_a_batch_api_refuses_the_batch_lane(
        db_url: str, conn: asyncpg.Connection) -> None:
    app = create_app(make_settings(db_url, function_url="http://127.0.0.1:9/unreachable"))
    async with app_client(app) as client:
        ids = await add_submissions(conn, 2)
        r = await enqueue(client, ids, lane="batch")
        assert r.status_code == 422 and "pools.default.batch" in r.json()["detail"]
        assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0


async def test_the_teacher_page_offers_mark_overnight_beside_mark_all(
        db_url: str, conn: asyncpg.Connection) -> None:
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    store = Store(await connect_pool(db_url, max_size=2))
    await demo.seed(store)
    await store.close()
    clock: Clock = Clock()
    with served("anthropic", clock, {}) as (emu, emu_url, fn_url):
        settings = lane_settings("anthropic", db_url, emu, emu_url, fn_url)
        async with app_client(create_app(settings)) as client:
            csrf = await login(client)
            page = (await client.get(PAGE)).text
            assert 'id="mark-all-estimate"' in page
            button = page[page.index('id="mark-overnight"'):]
            assert "Mark overnight (half price, by " in button[:600]
            r = await client.post(f"{PAGE}/mark", data={"csrf_token": csrf, "lane": "batch"},
                                  headers={"accept": "application/json"})
            assert r.status_code == 200 and r.json()["enqueued"] > 0
            lanes = {r["lane"] for r in await conn.fetch("SELECT lane FROM ai_marking_queue")}
            assert lanes == {"batch"}
    # Without a batch API the page offers only Mark All.
    async with app_client(create_app(make_settings(db_url))) as client:
        await login(client)
        assert 'id="mark-overnight"' not in (await client.get(PAGE)).text


@pytest.mark.parametrize("app_secret, answered", [(SIGNING, 200), (OTHER_SIGNING, 401)])
async def test_render_and_parse_calls_carry_the_dispatch_signature(
        db_url: str, app_secret: str, answered: int) -> None:
    fn = create_function(FunctionSettings(simulate_latency=0, function_token=FN_TOKEN,
                                          signing_secret=SIGNING))
    port = free_port()
    settings = make_settings(db_url, function_url=f"http://127.0.0.1:{port}/",
                             function_token=FN_TOKEN).with_overrides(signing_secret=app_secret)
    job = {"queue_id": "q-1", "callback_token": "t", "payload": {"rubric": "r", "max_score": 2},
           "submission": {"content": "an answer"}}
    with run_asgi(fn, port):
        async with httpx.AsyncClient() as http:
            modes = FunctionModes(http, settings.target())
            if answered == 200:
                rendered = await modes.render("openai", "m", [job])
                assert list(rendered.requests) == ["q-1"]
            else:
                with pytest.raises(FunctionModeError) as caught:
                    await modes.render("openai", "m", [job])
                assert caught.value.code.startswith("function_http_4")
