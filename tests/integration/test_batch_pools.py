"""The overnight lane per pool through the app's HTTP API: an OpenAI batch pool,
an Anthropic batch pool and a pool without a batch API side by side; a kind's default
lane; the 422s; and what batch rows charge to turns and spend caps."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.settings import Settings
from aiqueue.settings.kinds import Kind, Pool, QueueConfig
from aiqueue.web.app import create_app
from tests.batchapi.common import Behaviour, Clock
from tests.conftest import AUTH, add_submissions, app_client, make_settings
from tests.e2e.servers import free_port
from tests.integration.batch_kit import FN_TOKEN, PRICES, batch_pool, served, soon

pytestmark = pytest.mark.e2e
OA_LIVE = PRICES["gpt-4o-mini"]
AN_BATCH = (0.4, 2.0)  # declared: less than half of claude-haiku-4-5's live (1.0, 5.0)


@dataclasses.dataclass
class Pools:
    client: httpx.AsyncClient
    settings: Settings
    emus: dict[str, Any]  # by pool
    clock: Clock
    fates: dict[int, Behaviour]  # the n-th batch of each emulator


def pools_settings(db_url: str, emus: dict[str, tuple[Any, str]], fn_url: str) -> Settings:
    """Pools `oa` (OpenAI batch), `an` (Anthropic batch, a spend cap, declared batch prices)
    and `plain` (live only); kinds `essay` (oa, batch by default), `short` (an), `quiz`
    (plain); the default kind `mark` in the default pool, which has no batch API."""
    oa_emu, oa_url = emus["oa"]
    an_emu, an_url = emus["an"]
    pools = {
        "oa": batch_pool("oa", "openai", oa_emu, oa_url, max_in_flight=2,
                         prices={"gpt-4o-mini": (OA_LIVE.input, OA_LIVE.output)}),
        "an": batch_pool("an", "anthropic", an_emu, an_url, max_in_flight=2,
                         prices={"claude-haiku-4-5": (1.0, 5.0)},
                         batch_prices={"claude-haiku-4-5": AN_BATCH}, group_usd_per_day=50.0),
        "plain": Pool("plain", 2),
    }
    kinds = {
        "essay": Kind("essay", "oa", lane="batch", max_attempts=1,
                             function_url=fn_url, function_token=FN_TOKEN),
        "short": Kind("short", "an", function_url=fn_url, function_token=FN_TOKEN),
        "quiz": Kind("quiz", "plain", function_url=fn_url, function_token=FN_TOKEN),
    }
    nowhere = f"http://127.0.0.1:{free_port()}"  # the chain goes nowhere: the test drives
    return dataclasses.replace(
        make_settings(db_url, function_url=fn_url, function_token=FN_TOKEN, max_in_flight=2,
                      app_base_url=nowhere),
        queue_file=QueueConfig(pools, kinds))


@contextmanager
def two_providers(clock: Clock, fates: dict[int, Behaviour]
                  ) -> Iterator[tuple[dict[str, tuple[Any, str]], str]]:
    with ExitStack() as stack:
        oa, oa_url, fn_url = stack.enter_context(served("openai", clock, fates))
        an, an_url, _ = stack.enter_context(served("anthropic", clock, fates))
        yield {"oa": (oa, oa_url), "an": (an, an_url)}, fn_url


@pytest.fixture
async def pools(db_url: str) -> AsyncIterator[Pools]:
    clock, fates = Clock(), dict[int, Behaviour]()
    with two_providers(clock, fates) as (emus, fn_url):
        settings = pools_settings(db_url, emus, fn_url)
        async with app_client(create_app(settings)) as client:
            yield Pools(client, settings, {k: v[0] for k, v in emus.items()}, clock, fates)


async def enqueue(client: httpx.AsyncClient, ids: list[uuid.UUID], assignment: str,
                  **extra: Any) -> httpx.Response:
    body = {"assignment_id": assignment, "submission_ids": [str(i) for i in ids],
            "payload": {"rubric": "- chlorophyll", "max_score": 4}, **extra}
    return await client.post("/api/marking/enqueue", json=body, headers=AUTH)


async def cron(p: Pools, conn: asyncpg.Connection) -> None:
    # Each cron comes after the batches' look-again time (30 s): skip the wait.
    await conn.execute("UPDATE ai_marking_batches SET look_after = now()")
    assert (await p.client.get("/api/marking/process-queue", headers=AUTH)).status_code == 200


async def test_each_pool_batches_on_its_own_provider(pools: Pools,
                                                     conn: asyncpg.Connection) -> None:
    essays = await add_submissions(conn, 4, "hw-e")
    shorts = await add_submissions(conn, 3, "hw-s")
    # The kind's default lane: essay rows go to the batch lane without saying so.
    assert (await enqueue(pools.client, essays, "hw-e", kind="essay")).status_code == 202
    r = await enqueue(pools.client, shorts, "hw-s", kind="short", lane="batch",
                      deadline=soon(6 * 3600).isoformat())
    assert r.status_code == 202
    rows = await conn.fetch("SELECT kind, pool, lane FROM ai_marking_queue")
    assert {(r["kind"], r["pool"], r["lane"]) for r in rows} == {
        ("essay", "oa", "batch"), ("short", "an", "batch")}
    await cron(pools, conn)
    batches = await conn.fetch("SELECT pool, provider, model, rows FROM ai_marking_batches")
    assert {tuple(b) for b in batches} == {("oa", "openai", "gpt-4o-mini", 4),
                                           ("an", "anthropic", "claude-haiku-4-5", 3)}
    pools.clock.advance(2)
    await cron(pools, conn)
    statuses = await conn.fetch("SELECT kind, status, usage FROM ai_marking_queue")
    assert {r["status"] for r in statuses} == {"completed"}
    for row in statuses:
        usage = json.loads(row["usage"])
        prompt, completion = usage["prompt_tokens"], usage["completion_tokens"]
        # OpenAI's pool: half of live; Anthropic's: its declared batch price.
        price = (OA_LIVE.input / 2, OA_LIVE.output / 2) if row["kind"] == "essay" else AN_BATCH
        assert usage["cost_usd"] == pytest.approx(
            (prompt * price[0] + completion * price[1]) / 1e6)
    for emu in pools.emus.values():  # nothing of the students' stays at either provider
        assert all(not v for v in emu.held().values()), emu.held()


@pytest.mark.parametrize("extra, named", [
    ({"kind": "quiz", "lane": "batch"}, "pool 'plain'"),
    ({"lane": "batch"}, "pool 'default'"),  # the default kind's pool has no batch API
    ({"kind": "quiz", "deadline": "2099-01-01T00:00:00Z"}, "deadline is for"),
    ({"kind": "quiz", "lane": "batch", "dry_run": True}, "pool 'plain'"),
])
async def test_the_batch_lane_without_a_batch_api_is_refused(
        pools: Pools, conn: asyncpg.Connection, extra: dict[str, Any], named: str) -> None:
    ids = await add_submissions(conn, 2, "hw-q")
    r = await enqueue(pools.client, ids, "hw-q", **extra)
    assert r.status_code == 422 and named in r.json()["detail"], r.json()
    assert r.json()["error"] == "invalid"
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0


async def test_a_kinds_default_lane_gives_way_to_the_requests(
        pools: Pools, conn: asyncpg.Connection) -> None:
    ids = await add_submissions(conn, 2, "hw-l")
    assert (await enqueue(pools.client, ids, "hw-l", kind="essay",
                          lane="live")).status_code == 202
    lanes = {r["lane"] for r in await conn.fetch("SELECT lane FROM ai_marking_queue")}
    assert lanes == {"live"}


async def test_packing_charges_turns_and_spend_at_the_batch_price(
        pools: Pools, conn: asyncpg.Connection) -> None:
    ids = await add_submissions(conn, 3, "hw-m")
    assert (await enqueue(pools.client, ids, "hw-m", kind="short",
                          lane="batch")).status_code == 202
    await cron(pools, conn)
    # The default estimate (750 + 250 tokens) charged to the group, as a dispatch is.
    counter = await conn.fetchval(
        "SELECT counter FROM ai_marking_fair WHERE pool = 'an' AND group_key = 'hw-m'")
    assert counter == pytest.approx(3 * (750 + 2 * 250))
    row_usd = (750 * AN_BATCH[0] + 250 * AN_BATCH[1]) / 1e6
    charged = await conn.fetch("SELECT charged_tokens, charged_usd FROM ai_marking_queue")
    assert {(r["charged_tokens"], round(r["charged_usd"], 9)) for r in charged} == {
        (1250.0, round(row_usd, 9))}
    spent = await conn.fetchval("SELECT usd FROM ai_marking_spend WHERE pool = 'an' "
                                "AND group_key = 'hw-m' AND span = 'day'")
    assert spent == pytest.approx(3 * row_usd)
    pools.clock.advance(2)
    await cron(pools, conn)
    # Each result corrects its charge: the day's spend is what the results cost.
    costs = await conn.fetchval("SELECT sum((usage->>'cost_usd')::float8) FROM ai_marking_queue")
    spent = await conn.fetchval("SELECT usd FROM ai_marking_spend WHERE pool = 'an' "
                                "AND group_key = 'hw-m' AND span = 'day'")
    assert spent == pytest.approx(costs)


async def test_the_dry_run_prices_the_batch_lane(pools: Pools, conn: asyncpg.Connection
                                                 ) -> None:
    ids = await add_submissions(conn, 4, "hw-d")
    live = await enqueue(pools.client, ids, "hw-d", kind="short", dry_run=True)
    batch = await enqueue(pools.client, ids, "hw-d", kind="short", lane="batch", dry_run=True)
    assert live.status_code == batch.status_code == 200
    live_cost, batch_cost = live.json()["estimated_cost_usd"], batch.json()["estimated_cost_usd"]
    assert live_cost == pytest.approx(4 * (750 * 1.0 + 250 * 5.0) / 1e6)
    assert batch_cost == pytest.approx(4 * (750 * AN_BATCH[0] + 250 * AN_BATCH[1]) / 1e6)
    # The kind's default lane holds for the estimate too: essay rows are priced at half.
    essay = await enqueue(pools.client, ids, "hw-d", kind="essay", dry_run=True)
    assert essay.json()["estimated_cost_usd"] == pytest.approx(
        4 * (750 * OA_LIVE.input + 250 * OA_LIVE.output) / 2e6)
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0


async def test_an_errored_line_counts_against_its_kinds_own_attempts(
        pools: Pools, conn: asyncpg.Connection) -> None:
    pools.fates[1] = Behaviour(delay=1, line=lambda custom_id, body: "error")
    ids = await add_submissions(conn, 2, "hw-x")
    assert (await enqueue(pools.client, ids, "hw-x", kind="essay")).status_code == 202
    await cron(pools, conn)
    pools.clock.advance(2)
    await cron(pools, conn)
    # essay allows one attempt (QUEUE_MAX_ATTEMPTS is 3): its errored lines end failed.
    rows = await conn.fetch("SELECT status, last_error FROM ai_marking_queue")
    assert {tuple(r) for r in rows} == {("failed", "provider_line_500")}
