"""Turns by tokens and spend caps are a pool's own (docs/concepts.md), from aiqueue.toml."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from aiqueue.db.store import Store
from aiqueue.models import Completed
from aiqueue.settings import Settings, toml_load
from tests.conftest import add_submissions, make_settings
from tests.plans import plan_of

THRESHOLD = 5
TOML = """
[pools.openai]
max_in_flight = 4
prices = { "gpt-4o" = [2.5, 10.0], "gpt-4o-mini" = [0.15, 0.6] }
group_usd_per_hour = 0.01

[kinds.essay]
pool = "openai"
function_url = "http://essay.test/mark"
"""


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    path = tmp_path / "aiqueue.toml"
    path.write_text(TOML)
    return make_settings(db_url, queue_file=toml_load.load_file({}, path, local_run=True),
                         max_in_flight=4)


async def test_a_pools_cap_pauses_its_rows_only_and_unknown_models_pay_its_top_price(
        store: Store, conn: asyncpg.Connection, settings: Settings):
    money, plan = settings.money, settings.queue.plan
    # The unknown model is charged at the pool's most expensive price: gpt-4o's.
    doc = money.doc()
    assert doc is not None and doc["openai"]["top"] == [2.5, 10.0]
    assert doc["openai"]["group_usd_per_hour"] == 0.01 and doc["default"]["prices"] == {}
    for kind, pool in (("essay", "openai"), ("mark", "default")):
        ids = await add_submissions(conn, 5, "teacher-1")
        await store.enqueue(ids, "teacher-1", 0, {}, group="t1", kind=kind, pool=pool)
    # Each pool keeps its own counter for the same group.
    assert {r["pool"] for r in await conn.fetch("SELECT pool FROM ai_marking_fair")} == \
        {"openai", "default"}
    kinds: list[str] = []
    while (job := await store.claim(plan_of(4, THRESHOLD, plan=plan, money=money))) is not None:
        kinds.append(job.kind)
        usage = {"model": "some-new-model", "prompt_tokens": 1000, "completion_tokens": 500}
        await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, usage),
                             plan_of(plan=plan, money=money))
    # One essay row costs 1000 × $2.5 + 500 × $10 per 1M = $0.0075: the second
    # reaches $0.015 >= $0.01, so the pool's rows wait; the default pool (no cap)
    # marks all its rows of the same group.
    assert kinds.count("essay") == 2 and kinds.count("mark") == 5, kinds
    paused = await conn.fetchrow(
        "SELECT capped_by, capped_until FROM ai_marking_fair WHERE pool = 'openai'")
    assert paused["capped_by"] == "group_usd_per_hour" and paused["capped_until"] is not None
    spent = await conn.fetchval(
        "SELECT usd FROM ai_marking_spend WHERE pool = 'openai' AND group_key = 't1' "
        "AND span = 'hour'")
    assert spent == pytest.approx(0.015)
    # Priced in one place: the model has no price, so its results are unpriced jobs
    # (docs/concepts.md: no cost in the record or the stored usage) while the spend window was
    # charged the pool's top price for their tokens (docs/concepts.md), as asserted above.
    priced = await conn.fetch(
        "SELECT r.cost_usd, q.usage ? 'cost_usd' AS stored FROM ai_marking_results r "
        "JOIN ai_marking_queue q USING (queue_id) WHERE r.pool = 'openai'")
    assert [(r["cost_usd"], r["stored"]) for r in priced] == [(None, False)] * 2
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_results WHERE pool = 'default' AND cost_usd IS NULL") == 5
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE kind = 'essay' AND status = 'pending'") == 3
