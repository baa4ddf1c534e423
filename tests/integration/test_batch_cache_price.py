"""A batch-lane result with a prompt cache is priced in the store: its billed tokens (cache
reads at the cached price) at the batch price, and its saving counted at that price
(docs/overnight.md, docs/prompt-cache.md)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import pytest

from aiqueue.queue.overnight import settle
from tests.integration.batch_kit import PRICES, Rig, lane_rig

pytestmark = pytest.mark.e2e
MODEL = "gpt-4o-mini"


@pytest.fixture
async def rig(db_url: str, conn: asyncpg.Connection) -> AsyncIterator[Rig]:
    async with lane_rig("openai", db_url, conn, max_attempts=3) as out:
        yield out


async def test_a_cached_batch_row_is_priced_at_the_batch_price_of_its_billed_tokens(
        rig: Rig) -> None:
    await rig.enqueue(1)
    assert (await rig.step()).packed == 1
    row = await rig.conn.fetchrow("SELECT queue_id, dispatch_seq, attempts "
                                  "FROM ai_marking_queue WHERE status = 'processing'")
    token = rig.rt.tokens.callback(row["queue_id"], row["dispatch_seq"], row["attempts"])
    # 2,400 input tokens, 2,000 of them read from the cache (OpenAI's spelling).
    usage = {"model": MODEL, "prompt_tokens": 2400, "completion_tokens": 300,
             "prompt_tokens_details": {"cached_tokens": 2000}}
    assert await settle(rig.rt, [{"queue_id": str(row["queue_id"]), "token": token,
                                  "status": "completed", "result": {"score": 5},
                                  "usage": usage}]) == []
    stored = json.loads(await rig.conn.fetchval("SELECT usage::text FROM ai_marking_queue"))
    live_in, live_out = PRICES[MODEL].input, PRICES[MODEL].output
    batch_in, batch_out = live_in / 2, live_out / 2
    # 400 uncached + 2,000 read at 0.1 of the input price: 600 billed, at the batch price.
    assert stored["billed_prompt_tokens"] == 600
    assert stored["cost_usd"] == pytest.approx((600 * batch_in + 300 * batch_out) / 1e6)
    assert stored["cache_saved_usd"] == pytest.approx(1800 * batch_in / 1e6)
    record = await rig.conn.fetchrow("SELECT cost_usd, lane FROM ai_marking_results")
    assert record["lane"] == "batch"
    assert float(record["cost_usd"]) == pytest.approx(stored["cost_usd"])
