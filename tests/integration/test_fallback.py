"""Ordered fallback between kinds: a pool whose function answers 503."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import respx

from aiqueue.settings import toml_load
from aiqueue.web.app import create_app
from tests.conftest import AUTH, SELF_CHAIN, add_submissions, app_client, make_settings

TOML = """
[pools.main]
max_in_flight = 2

[pools.spare]
max_in_flight = 3

[kinds.essay]
pool = "main"
function_url = "http://essay.test/mark"
fallback = "mini"
fallback_after_seconds = 0.3

[kinds.mini]
pool = "spare"
function_url = "http://mini.test/mark"
max_in_flight = 2
"""
ESSAY, MINI = "http://essay.test/mark", "http://mini.test/mark"
# The pool's hold after each 503: the model's Retry-After.
HOLD = 1
AFTER = 0.3  # fallback_after_seconds


@pytest.fixture
def routes() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as mock:
        mock.post(SELF_CHAIN).mock(return_value=httpx.Response(200, json={}))
        mock.post(ESSAY).mock(return_value=httpx.Response(503, headers={"retry-after": "1"}))
        mock.post(MINI).mock(return_value=httpx.Response(202))
        yield mock


@pytest.fixture
async def client(db_url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    path = tmp_path / "aiqueue.toml"
    path.write_text(TOML)
    file = toml_load.load_file({}, path, local_run=True)
    async with app_client(create_app(make_settings(db_url, queue_file=file))) as c:
        yield c


async def enqueue(client: httpx.AsyncClient, conn: asyncpg.Connection, kind: str,
                  n: int) -> list[str]:
    ids = await add_submissions(conn, n, f"hw-{kind}")
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": f"hw-{kind}", "submission_ids": [str(i) for i in ids], "kind": kind})
    assert r.status_code == 202
    queue_ids: list[str] = r.json()["queue_ids"]
    return queue_ids


class Function:
    """A function that took dispatches: answers each by the webhook, once, as `model`."""

    def __init__(self, client: httpx.AsyncClient, route: respx.Route, model: str,
                 tokens: tuple[int, int] = (5, 2)) -> None:
        self.client, self.route, self.model, self.answered = client, route, model, 0
        self.tokens = tokens

    async def answer(self) -> int:
        calls = list(self.route.calls)[self.answered:]
        self.answered += len(calls)
        for call in calls:
            sent = json.loads(call.request.content)
            item = {"queue_id": sent["queue_id"], "token": sent["callback_token"],
                    "status": "completed", "result": {"score": 1},
                    "usage": {"model": self.model, "prompt_tokens": self.tokens[0],
                              "completion_tokens": self.tokens[1]}}
            await self.client.post("/webhooks/ai-mark", json=item)
        return len(calls)


async def in_flight(conn: asyncpg.Connection) -> tuple[int, int]:
    """(rows holding a slot of pool spare, of them run by mini's function)."""
    row = await conn.fetchrow(
        "SELECT count(*) AS pool, count(*) FILTER (WHERE kind = 'mini' "
        "OR run_kind = 'mini') AS kind FROM ai_marking_claimed "
        "WHERE pool = 'spare'")
    return row["pool"], row["kind"]


async def run(client: httpx.AsyncClient, conn: asyncpg.Connection, mini: Function,
              seconds: float) -> int:
    """Cron steps and answers until no row is left pending or processing (at most
    `seconds`); the most rows mini's function held at once."""
    most = 0
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end and await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE status IN ('pending', 'processing')"):
        await client.get("/api/marking/process-queue", headers=AUTH)
        most = max(most, (await in_flight(conn))[1])
        await mini.answer()
        most = max(most, (await in_flight(conn))[1])
        await asyncio.sleep(0.05)
    return most


async def test_a_pool_answering_503_falls_back_and_comes_back(
        client: httpx.AsyncClient, conn: asyncpg.Connection, routes: respx.MockRouter):
    mini = Function(client, routes.routes[2], "mini-model")
    essays = await enqueue(client, conn, "essay", 6)
    minis = await enqueue(client, conn, "mini", 4)
    most = await run(client, conn, mini, 20.0)
    rows = await conn.fetch("SELECT queue_id::text, kind, status, run_kind FROM ai_marking_queue")
    by_id = {r["queue_id"]: r for r in rows}
    # Every essay was marked by the fallback's function; none failed; each kept its kind.
    assert {by_id[q]["status"] for q in essays + minis} == {"completed"}
    assert {by_id[q]["kind"] for q in essays} == {"essay"}
    assert {by_id[q]["run_kind"] for q in essays} == {"mini"}
    results = await conn.fetch("SELECT queue_id::text, model, pool FROM ai_marking_results")
    assert {r["model"] for r in results} == {"mini-model"}
    assert {r["pool"] for r in results if r["queue_id"] in essays} == {"spare"}
    ran = await conn.fetch("SELECT ran_kind FROM ai_marking_attempts a JOIN ai_marking_queue q "
                           "USING (queue_id) WHERE q.kind = 'essay' AND a.outcome = 'completed'")
    assert [r["ran_kind"] for r in ran] == ["mini"] * 6
    # The fallback's own cap (2) held while it served two kinds.
    assert most <= 2
    stats = (await client.get("/api/marking/stats", headers=AUTH)).json()
    assert stats["kinds"]["essay"]["on_fallback"] == "mini"
    metrics = (await client.get("/metrics", headers=AUTH)).text
    assert 'aiqueue_kind_on_fallback{fallback="mini",kind="essay"} 1.0' in metrics
    detail = (await client.get(f"/api/marking/rows/{essays[0]}", headers=AUTH)).json()
    assert detail["history"][-1]["ran_as"] == "mini"
    assert detail["result"]["model"] == "mini-model" and detail["kind"] == "essay"

    # The model is back: once the pool's hold ends, new rows go to essay's function again.
    routes.routes[1].mock(return_value=httpx.Response(202))
    await asyncio.sleep(HOLD + AFTER + 0.3)  # the hold, then the wait before a probe
    before = mini.route.call_count
    essay = Function(client, routes.routes[1], "essay-model")
    essay.answered = routes.routes[1].call_count  # the 503s need no answer
    again = await enqueue(client, conn, "essay", 2)
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    while loop.time() < end and await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE status <> 'completed'"):
        await client.get("/api/marking/process-queue", headers=AUTH)
        await essay.answer()
        await mini.answer()
        await asyncio.sleep(0.05)
    sent = {json.loads(c.request.content)["queue_id"] for c in routes.routes[1].calls}
    assert set(again) <= sent
    assert mini.route.call_count == before
    models = await conn.fetch("SELECT model FROM ai_marking_results WHERE queue_id = ANY ($1)",
                              [uuid.UUID(q) for q in again])
    assert [r["model"] for r in models] == ["essay-model"] * 2
    stats = (await client.get("/api/marking/stats", headers=AUTH)).json()
    assert stats["kinds"]["essay"].get("on_fallback") is None


CAPPED = TOML.replace("[pools.spare]\nmax_in_flight = 3\n", """[pools.spare]
max_in_flight = 3
prices = { "mini-model" = [100.0, 100.0] }
group_usd_per_hour = 0.3
""")


async def test_the_fallbacks_spend_cap_holds_while_it_serves_two_kinds(
        db_url: str, tmp_path: Path, conn: asyncpg.Connection, routes: respx.MockRouter):
    path = tmp_path / "capped.toml"
    path.write_text(CAPPED)
    file = toml_load.load_file({}, path, local_run=True)
    async with app_client(create_app(make_settings(db_url, queue_file=file))) as client:
        mini = Function(client, routes.routes[2], "mini-model", (750, 250))
        ids = await add_submissions(conn, 8, "hw-cap")

        async def steps(seconds: float, until: str | None = None) -> None:
            loop = asyncio.get_running_loop()
            end = loop.time() + seconds
            while loop.time() < end and not (until and await conn.fetchval(until)):
                await client.get("/api/marking/process-queue", headers=AUTH)
                await mini.answer()
                await asyncio.sleep(0.05)

        for kind, part in (("essay", ids[:4]), ("mini", ids[4:])):
            r = await client.post("/api/marking/enqueue", headers=AUTH, json={
                "assignment_id": "hw-cap", "submission_ids": [str(i) for i in part],
                "kind": kind, "group": "teacher"})
            assert r.status_code == 202
            # The essays first fall back and use part of the budget, then mini's own come.
            await steps(8 if kind == "essay" else 3,
                        "SELECT count(*) FROM ai_marking_queue WHERE status = 'completed'"
                        if kind == "essay" else None)
        rows = await conn.fetch("SELECT kind, status, run_kind FROM ai_marking_queue")
        done = [r for r in rows if r["status"] == "completed"]
        # Each row costs $0.10 (750 + 250 tokens at $100 per 1M): the group's $0.30 an
        # hour in the fallback's pool bought three rows of both kinds together.
        assert len(done) == 3
        assert any(r["kind"] == "essay" and r["run_kind"] == "mini" for r in done)
        assert {r["status"] for r in rows} == {"completed", "pending"}  # none failed
        # mini's own rows wait too, though they alone spent less than the cap.
        waiting = {r["kind"] for r in rows if r["status"] == "pending"}
        assert "mini" in waiting
        assert sum(r["kind"] == "mini" for r in done) < 3
        spent = await conn.fetchval("SELECT sum(usd) FROM ai_marking_spend WHERE pool = 'spare' "
                                    "AND group_key = 'teacher' AND span = 'hour'")
        assert spent == pytest.approx(0.3)
        listed = (await client.get("/api/marking/queue?status=pending", headers=AUTH)).json()
        # (An essay row back in its own pool between two refusals waits for that pool.)
        assert {i["waiting_for"] for i in listed["items"] if i["pool"] == "spare"} == {
            "spend_cap"}


async def test_a_function_that_takes_calls_but_reports_overloaded_falls_back_too(
        client: httpx.AsyncClient, conn: asyncpg.Connection, routes: respx.MockRouter):
    # The function acknowledges each dispatch (202), then its callback says the model is
    # overloaded: the ack is no result, so the run of refusals goes on.
    routes.routes[1].mock(return_value=httpx.Response(202))
    mini = Function(client, routes.routes[2], "mini-model")
    essays = await enqueue(client, conn, "essay", 3)
    refused = 0
    loop = asyncio.get_running_loop()
    end = loop.time() + 20
    while loop.time() < end and await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE status <> 'completed'"):
        await client.get("/api/marking/process-queue", headers=AUTH)
        for call in list(routes.routes[1].calls)[refused:]:
            sent = json.loads(call.request.content)
            item = {"queue_id": sent["queue_id"], "token": sent["callback_token"],
                    "status": "failed", "error": "overloaded", "retry_after": HOLD}
            await client.post("/webhooks/ai-mark", json=item)
            refused += 1
        await mini.answer()
        await asyncio.sleep(0.05)
    rows = await conn.fetch("SELECT status, run_kind FROM ai_marking_queue WHERE queue_id = "
                            "ANY ($1)", [uuid.UUID(q) for q in essays])
    assert {(r["status"], r["run_kind"]) for r in rows} == {("completed", "mini")}
    assert refused >= 1
