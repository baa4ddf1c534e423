"""The prompt cache's scheduling through the Store (docs/prompt-cache.md): warm-up, locality within
fair turns and its bound, a short payload as before, billed tokens, the cache key."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from aiqueue.db.store import Store
from aiqueue.doctor.text import cache_finding
from aiqueue.models import Completed, Job
from aiqueue.queue.cache import counts
from aiqueue.reads.usage import usage_json
from aiqueue.settings.kinds import DEFAULT_KIND, DEFAULT_POOL, Kind, Pool, QueueConfig, merged
from aiqueue.settings.money import Money
from aiqueue.settings.plan import ClaimPlan
from aiqueue.settings.prompt_cache import PromptCache
from aiqueue.web.costs import cost_card
from tests.conftest import add_submissions
from tests.integration.money_kit import Model

CAP = 8
THRESHOLD = 5


def queue(ttl: float = 300.0, quantum: float | None = None, cap: int = CAP,
          **pool: object) -> QueueConfig:
    cache = PromptCache(ttl_seconds=ttl, fair_quantum=quantum, write=1.25, read=0.1)
    return merged(None, Pool(DEFAULT_POOL, cap, prompt_cache=cache, **pool),  # type: ignore[arg-type]
                  Kind(DEFAULT_KIND, DEFAULT_POOL))


def plan(ttl: float = 300.0, quantum: float | None = None, cap: int = CAP,
         **pool: object) -> ClaimPlan:
    q = queue(ttl, quantum, cap, **pool)
    return ClaimPlan.build(q, THRESHOLD, 60.0, Money.of(q, 3600.0, 86400.0))


def rubric(name: str, tokens: int = 2000) -> dict[str, object]:
    """A payload of about `tokens` tokens (its JSON length / 4)."""
    return {"assignment": name, "rubric": "r" * (tokens * 4 - 40)}


async def enqueue(store: Store, conn: asyncpg.Connection, group: str, n: int,
                  payload: dict[str, object]) -> None:
    ids = await add_submissions(conn, n, assignment_id=group)
    await store.enqueue(ids, group, 0, payload)


async def claim_all(store: Store, the_plan: ClaimPlan) -> list[Job]:
    jobs = []
    while (job := await store.claim(the_plan)) is not None:
        jobs.append(job)
    return jobs


async def test_a_cold_prefix_sends_one_row_alone_until_it_has_an_answer(
        store: Store, conn: asyncpg.Connection):
    for name in ("A", "B", "C"):
        await enqueue(store, conn, name, 6, rubric(name))
    p = plan()
    first = await claim_all(store, p)
    # One row of each cold prefix; the five free slots wait, as every due row's
    # prefix is warming.
    assert sorted(j.assignment_id for j in first) == ["A", "B", "C"]
    a = next(j for j in first if j.assignment_id == "A")
    assert a.cache_key == await conn.fetchval(
        "SELECT encode(sha256, 'hex') FROM ai_marking_payloads "
        "WHERE payload ->> 'assignment' = 'A'")
    # A progress item says A's call has begun answering: its entry is readable.
    assert await store.heartbeat(a.queue_id, a.dispatch_seq, {"current": 1})
    fanned = await claim_all(store, p)
    assert [j.assignment_id for j in fanned] == ["A"] * 5
    assert {j.cache_key for j in fanned} == {a.cache_key}
    # B's result: its rows go out too, once slots free.
    b = next(j for j in first if j.assignment_id == "B")
    assert await store.complete(Completed(b.queue_id, b.dispatch_seq, {"score": 1}), p)
    assert [j.assignment_id for j in await claim_all(store, p)] == ["B"]


async def test_a_slot_waits_for_a_warm_up_one_mark_at_most(
        store: Store, conn: asyncpg.Connection):
    await enqueue(store, conn, "A", 3, rubric("A"))
    p = plan()
    assert len(await claim_all(store, p)) == 1
    # The pool's recent mark is 0.05 s: after it, the other rows go without an answer.
    await conn.execute("INSERT INTO ai_marking_cache_pools (pool, mark_seconds) "
                       "VALUES ('default', 0.05)")
    await conn.execute("UPDATE ai_marking_prefixes SET warming_at = now() - interval '1 second'")
    await conn.execute("UPDATE ai_marking_fair SET due_at = NULL")
    assert len(await claim_all(store, p)) == 1  # a cold prefix again: one row alone


async def _claim_order(store: Store, the_plan: ClaimPlan) -> list[str]:
    order = []
    while (job := await store.claim(the_plan)) is not None:
        order.append(job.assignment_id)
        assert await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}),
                                    the_plan)
    return order


@pytest.mark.parametrize("ttl", [300.0, 0.0])
async def test_a_short_payload_is_scheduled_as_before(store: Store, conn: asyncpg.Connection,
                                                      ttl: float):
    # 600 tokens, under min_tokens: no warm-up, today's turns (one row of each
    # group per round), whether the pool schedules for the cache or not.
    for name in ("A", "B", "C"):
        await enqueue(store, conn, name, 3, rubric(name, 600))
    assert await _claim_order(store, plan(ttl, cap=3)) == ["A", "B", "C"] * 3


async def test_the_doctor_warns_of_prefixes_too_short_to_cache(
        store: Store, conn: asyncpg.Connection):
    await enqueue(store, conn, "A", 2, rubric("A", 600))
    await enqueue(store, conn, "B", 2, rubric("B", 600))
    assert len(await claim_all(store, plan())) == 4  # no warm-up either
    seen = await store.prompt_prefixes()
    assert seen["default"][0] == 2 and 590 <= seen["default"][1] <= 610
    assert cache_finding("default", 1024, seen["default"])[:2] == (
        "warn", "pool default: prefixes of about 600 tokens: the model caches none "
                "(min_tokens 1024)")
    await enqueue(store, conn, "C", 1, rubric("C", 2000))
    await claim_all(store, plan())
    await enqueue(store, conn, "D", 1, rubric("D", 2000))
    await enqueue(store, conn, "E", 1, rubric("E", 2000))
    await claim_all(store, plan())
    assert cache_finding("default", 1024, (await store.prompt_prefixes())["default"])[0] == (
        "pass")


async def test_locality_stays_within_the_quantum(store: Store, conn: asyncpg.Connection):
    # Essays share a cached rubric; short answers have no payload.  A warm essay
    # prefix goes first while its group is within the quantum of the smallest
    # counter: the service gap stays within VTC's bound plus one quantum.
    largest = 4000 * 4 // 5 + 2 * (4000 // 5)
    model = Model(store, conn, plan=queue(quantum=3 * largest, cap=4))
    await model.enqueue("essays", 60, 4000, payload=rubric("essays"))
    await model.enqueue("short", 600, 4000)
    left = {"essays": 60, "short": 600}
    await model.run_while_both_wait("essays", "short", left, 4)
    assert model.max_gap <= (2 + 4) * largest + 3 * largest, model.max_gap
    assert model.share("essays") == pytest.approx(0.5, abs=0.1), model.tokens
    # Locality did act: the essays ran ahead by more than VTC alone lets them.
    assert model.max_gap > 2 * largest, model.max_gap


def test_usage_counts_in_every_spelling():
    assert counts({"prompt_tokens": 2400, "completion_tokens": 300,
                   "cache_read_tokens": 2000}) == {
        "prompt_tokens": 2400, "completion_tokens": 300, "cache_read_tokens": 2000}
    assert counts({"prompt_tokens": 2400, "completion_tokens": 300,
                   "prompt_tokens_details": {"cached_tokens": 1920}})["cache_read_tokens"] == 1920
    # Anthropic's input_tokens leaves the cache out.
    assert counts({"input_tokens": 400, "output_tokens": 300, "cache_read_input_tokens": 0,
                   "cache_creation_input_tokens": 2000}) == {
        "prompt_tokens": 2400, "completion_tokens": 300, "cache_read_tokens": 0,
        "cache_write_tokens": 2000}


async def test_a_result_is_charged_at_billed_tokens(store: Store, conn: asyncpg.Connection):
    await enqueue(store, conn, "A", 2, rubric("A"))
    p = plan(prices={"m": (1.0, 4.0)})
    job = await store.claim(p)
    assert job is not None
    before = await conn.fetchval("SELECT counter FROM ai_marking_fair WHERE group_key = 'A'")
    charged = await conn.fetchval("SELECT charged_tokens FROM ai_marking_queue "
                                  "WHERE queue_id = $1", job.queue_id)
    usage = {"model": "m", **counts({"input_tokens": 400, "output_tokens": 300,
                                     "cache_read_input_tokens": 2000})}
    assert await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, usage),
                                p)
    stored = json.loads(await conn.fetchval("SELECT usage::text FROM ai_marking_queue "
                                            "WHERE queue_id = $1", job.queue_id))
    # 400 uncached + 2,000 read at 0.1: 600 input tokens billed, of 2,400.
    assert stored["billed_prompt_tokens"] == 600
    assert stored["cost_usd"] == pytest.approx((600 * 1.0 + 300 * 4.0) / 1e6)
    assert stored["cache_saved_usd"] == pytest.approx(1800 / 1e6)
    after = await conn.fetchval("SELECT counter FROM ai_marking_fair WHERE group_key = 'A'")
    assert after - before == pytest.approx(600 + 2 * 300 - charged)
    row = await conn.fetchrow("SELECT cache_read_tokens, cache_write_tokens, cache_saved_usd, "
                              "prompt_tokens, cost_usd FROM ai_marking_results")
    assert (row["cache_read_tokens"], row["cache_write_tokens"], row["prompt_tokens"]) == (
        2000, 0, 2400)
    assert float(row["cost_usd"]) == pytest.approx((600 * 1.0 + 300 * 4.0) / 1e6)
    tally = await conn.fetchrow("SELECT read_tokens, write_tokens, saved_usd "
                                "FROM ai_marking_cache_pools WHERE pool = 'default'")
    assert (tally["read_tokens"], tally["write_tokens"]) == (2000, 0)
    assert tally["saved_usd"] == pytest.approx(1800 / 1e6)
    # The usage report, the cost card and /metrics read them.
    total = (await store.usage_report(datetime.now(UTC) - timedelta(days=1),
                                      datetime.now(UTC) + timedelta(days=1), "day"))[-1]
    assert (total.cache_read_tokens, total.cache_write_tokens, total.cache_saved_tokens) == (
        2000, 0, 1800)
    assert cost_card({"today": usage_json(total), "month": usage_json(total),
                      "by_model": []})[0].cache == (
        "2,000 read · 0 written · the cache saved $0.00, 75 % of input")
    assert [(c.pool, c.read_tokens) for c in await store.cache_counters()] == [("default", 2000)]


async def test_the_key_is_sharded_above_key_rpm(store: Store, conn: asyncpg.Connection):
    await enqueue(store, conn, "A", 4, rubric("A"))
    await enqueue(store, conn, "B", 1, rubric("B"))
    p = plan()
    job = await store.claim(p)
    assert job is not None and job.assignment_id == "A"
    assert await store.cache_key(job.queue_id, 2) == job.cache_key
    await conn.execute("UPDATE ai_marking_prefixes SET minute_count = 3")
    assert await store.cache_key(job.queue_id, 2) == job.cache_key + ":1"
    await conn.execute("UPDATE ai_marking_prefixes SET minute_count = 5")
    assert await store.cache_key(job.queue_id, 2) == job.cache_key + ":2"


async def test_a_provider_batch_is_ordered_by_cache_key(store: Store, conn: asyncpg.Connection):
    later = datetime.now(UTC) + timedelta(hours=1)
    for name in ("A", "B", "A", "B", "C", "A"):
        ids = await add_submissions(conn, 2, assignment_id=name)
        await store.enqueue(ids, name, 0, rubric(name), batch=(later, later))
    rows = await store.batch_open("default", "openai", "m", 100)
    keys = [r.cache_key for r in rows]
    assert len(keys) == 12 and len(set(keys)) == 3
    assert keys == sorted(keys)  # each prefix's requests together
    # The key is the hash the payload is stored under.
    stored = await conn.fetch("SELECT payload ->> 'assignment' AS a, encode(sha256, 'hex') AS h "
                              "FROM ai_marking_payloads")
    assert {(r.assignment_id, r.cache_key) for r in rows} == {(x["a"], x["h"]) for x in stored}
