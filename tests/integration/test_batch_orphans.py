"""Batches of a pool that no longer declares a batch API (docs/overnight.md): still polled,
applied or cancelled, and deleted at the provider, on the account recorded with each batch;
nothing new is packed; without that account, their rows go live."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import asyncpg
import pytest

from aiqueue.queue import overnight
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from tests.batchapi.common import Behaviour
from tests.conftest import make_settings
from tests.integration.batch_kit import FN_TOKEN, PRICES, Rig, lane_rig, soon

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["openai", "anthropic"])
async def rig(request: pytest.FixtureRequest, db_url: str, conn: asyncpg.Connection
              ) -> AsyncIterator[Rig]:
    async with lane_rig(request.param, db_url, conn, max_attempts=3) as out:
        yield out


def without_batch(rig: Rig, environment: dict[str, str]) -> Settings:
    """The same deployment after the pool's `batch` keys were taken out of aiqueue.toml."""
    s = rig.rt.settings
    base = make_settings(s.database_url or "", function_url=s.function_url,
                         function_token=FN_TOKEN, max_in_flight=4)
    return dataclasses.replace(base, model_prices=PRICES, environment=environment)


async def packed(rig: Rig, n: int = 3) -> None:
    await rig.enqueue(n, deadline=soon(6 * 3600))
    report = await rig.step()
    assert report.packed == n
    states = await rig.conn.fetch("SELECT state, base_url, key_env FROM ai_marking_batches")
    assert [(r["state"], r["key_env"]) for r in states] == [("submitted", "BATCH_KEY")]


async def test_a_removed_pools_batch_is_still_applied_and_deleted(rig: Rig) -> None:
    await packed(rig)
    rt = await Runtime.create(without_batch(rig, {"BATCH_KEY": rig.emu.key}),
                              rig.rt.settings.database_url or "")
    try:
        assert rt.settings.queue.batch_pools == []
        rig.clock.advance(5)  # the provider has answered every line
        await overnight.run_if_due(rt, force=True)
        await rig.enqueue(2, assignment="hw-after")  # nothing new is packed for the pool
        await overnight.run_if_due(rt, force=True)
    finally:
        await rt.close()
    assert await rig.statuses() == {"completed": 3, "pending": 2}
    assert rig.emu.created == 1 and rig.emu.requests_answered == 3
    assert all(not v for v in rig.held().values()), rig.held()  # deleted at the provider
    assert [r["state"] for r in await rig.conn.fetch("SELECT state FROM ai_marking_batches")
            ] == ["done"]


async def test_a_removed_pools_stalled_batch_is_cancelled_at_its_fallback_point(
        rig: Rig) -> None:
    rig.fates[1] = Behaviour(stall=True, cancel_delay=0)
    await packed(rig)
    rt = await Runtime.create(without_batch(rig, {"BATCH_KEY": rig.emu.key}),
                              rig.rt.settings.database_url or "")
    try:
        # Its deadline is near: the fallback point has passed.
        await rig.conn.execute("UPDATE ai_marking_queue SET deadline = now() + interval '1 s'")
        for _ in range(3):
            rig.clock.advance(2)
            await overnight.run_if_due(rt, force=True)
            # The next look's time has come (the lane looks every poll_seconds).
            await rig.conn.execute("UPDATE ai_marking_batches SET look_after = now()")
    finally:
        await rt.close()
    statuses = await rig.statuses()
    assert statuses.get("processing", 0) == 0 and sum(statuses.values()) == 3
    assert all(not v for v in rig.held().values()), rig.held()
    assert [r["state"] for r in await rig.conn.fetch("SELECT state FROM ai_marking_batches")
            ] == ["done"]


async def test_without_its_account_a_removed_pools_rows_go_live(rig: Rig) -> None:
    await packed(rig)
    rt = await Runtime.create(without_batch(rig, {}), rig.rt.settings.database_url or "")
    try:
        await overnight.run_if_due(rt, force=True)
    finally:
        await rt.close()
    rows = await rig.conn.fetch("SELECT status, lane, attempts FROM ai_marking_queue")
    assert {(r["status"], r["lane"]) for r in rows} <= {("pending", "live"),
                                                       ("processing", "live"),
                                                       ("completed", "live")}
    assert all(r["attempts"] <= 1 for r in rows)
    assert [(r["state"], r["error"]) for r in await rig.conn.fetch(
        "SELECT state, error FROM ai_marking_batches")] == [("abandoned", "batch_pool_removed")]
