"""The overnight lane, seen (docs/overnight.md): the Batches card of /ai-queue and /metrics'
batch gauges, against a real PostgreSQL and the provider emulators."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from aiqueue.web.app import create_app
from tests.conftest import AUTH, SECRET
from tests.integration.batch_kit import Rig, lane_rig, soon

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["openai", "anthropic"])
async def rig(request: pytest.FixtureRequest, db_url: str, conn: asyncpg.Connection
              ) -> AsyncIterator[Rig]:
    async with lane_rig(request.param, db_url, conn) as out:
        yield out


@pytest.fixture
async def client(rig: Rig) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(rig.rt.settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://app.test") as c:
        yield c
    await app.state.aiqueue.close()


async def card(client: httpx.AsyncClient) -> str:
    r = await client.post("/ai-queue/login", data={"password": SECRET, "next": "/ai-queue"})
    assert r.status_code == 303
    page = await client.get("/ai-queue")
    assert page.status_code == 200
    found = re.search(r'<section class="card" id="batches">(.*?)</section>', page.text, re.S)
    assert found, "the page has a Batches card"
    return found.group(1)


async def test_the_batches_card_shows_each_open_batch(rig: Rig,
                                                      client: httpx.AsyncClient) -> None:
    assert "No batch is open" in await card(client)
    await rig.enqueue(3, deadline=soon(7200))
    await rig.step()
    html = await card(client)
    batch_id = await rig.conn.fetchval("SELECT id FROM ai_marking_batches")
    row = re.search(rf'<tr data-batch="{batch_id}" data-state="submitted">(.*?)</tr>', html,
                    re.S)
    assert row, html
    cells = [re.sub(r"<[^>]+>", "", c).strip()
             for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)]
    assert cells[:6] == [str(batch_id), "default", rig.provider, "3", "3", "at the provider"]
    assert cells[6].endswith("s")  # its age
    assert "in 1h 59m" in cells[7] or "in 2h" in cells[7]  # the nearest deadline
    assert "photosynthesis" not in html  # never a student's answer
    rig.clock.advance(2)
    await rig.step()
    assert "No batch is open" in await card(client)


async def test_metrics_count_the_lanes_rows_and_open_batches(rig: Rig,
                                                             client: httpx.AsyncClient) -> None:
    await rig.enqueue(3)
    await rig.step()
    await rig.enqueue(2)  # waiting for the next batch
    text = (await client.get("/metrics", headers=AUTH)).text
    assert 'aiqueue_batch_rows{pool="default",state="submitted"} 3.0' in text
    assert 'aiqueue_batch_rows{pool="default",state="waiting"} 2.0' in text
    assert 'aiqueue_batches_open{pool="default"} 1.0' in text
    for _ in range(3):  # both batches answered, applied and deleted
        rig.clock.advance(2)
        await rig.step()
    assert await rig.statuses() == {"completed": 5}
    text = (await client.get("/metrics", headers=AUTH)).text
    assert 'aiqueue_batches_open{pool="default"} 0.0' in text
    assert "aiqueue_batch_rows{" not in text


async def test_a_batch_rows_lane_and_deadline_show_wherever_it_is_shown(
        rig: Rig, client: httpx.AsyncClient) -> None:
    due = soon(7200)
    qids = await rig.enqueue(2, deadline=due, assignment="hw-night")
    await rig.step()
    sub = await rig.conn.fetchval("SELECT submission_id FROM ai_marking_queue "
                                  "WHERE queue_id = $1", qids[0])
    spelled = due.isoformat()
    listed = (await client.get("/api/marking/queue?assignment_id=hw-night",
                               headers=AUTH)).json()["items"]
    assert {(r["lane"], r["deadline"], r["status"]) for r in listed} == {
        ("batch", spelled, "processing")}
    status = (await client.get(f"/api/marking/submissions/{sub}/status", headers=AUTH)).json()
    assert (status["lane"], status["deadline"]) == ("batch", spelled)
    progress = (await client.get("/api/marking/assignments/hw-night/progress",
                                 headers=AUTH)).json()
    assert (progress["lane"], progress["batch"], progress["deadline"]) == ("batch", 2, spelled)
    await card(client)  # signs in
    detail = (await client.get(f"/ai-queue/rows/{qids[0]}")).text
    assert 'data-lane="batch">overnight batch, deadline' in detail
    table = (await client.get("/ai-queue?assignment_id=hw-night")).text
    assert table.count('data-lane="batch"') == 2
    # Once marked, the run shows no batch rows left (its rows keep their lane).
    rig.clock.advance(2)
    await rig.step()
    progress = (await client.get("/api/marking/assignments/hw-night/progress",
                                 headers=AUTH)).json()
    assert (progress["lane"], progress["batch"], progress["deadline"]) == ("live", 0, None)
    live = (await client.get("/api/marking/queue?status=completed", headers=AUTH)).json()
    assert {r["lane"] for r in live["items"]} == {"batch"}
