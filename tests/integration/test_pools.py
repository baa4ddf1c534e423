"""Model pools and task kinds in the claim (docs/concepts.md): caps, routing, holds, turns."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed, Job
from aiqueue.settings import Settings
from tests.conftest import add_submissions
from tests.integration.pools_kit import KIND_CAPS, POOL_CAPS, pools_settings
from tests.plans import plan_of, settle_one

THRESHOLD, DAY = 5, 86400.0


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return pools_settings(db_url, tmp_path)


@pytest.fixture
async def stores(db_url: str) -> AsyncIterator[list[Store]]:
    """Three instances, each with its own connection pool."""
    made = [Store(await connect_pool(db_url, max_size=4)) for _ in range(3)]
    yield made
    for s in made:
        await s.close()


async def enqueue(store: Store, conn: asyncpg.Connection, settings: Settings, kind: str,
                  n: int, assignment: str = "hw-1") -> None:
    ids = await add_submissions(conn, n, assignment)
    await store.enqueue(ids, assignment, 0, {}, kind=kind,
                        pool=settings.queue.kind(kind).pool)


async def claim(store: Store, settings: Settings) -> Job | None:
    return await store.claim(plan_of(settings.max_in_flight, THRESHOLD, plan=settings.queue))


async def in_flight(conn: asyncpg.Connection) -> tuple[dict[str, int], dict[str, int]]:
    rows = await conn.fetch("SELECT kind, pool FROM ai_marking_claimed")
    kinds: dict[str, int] = {}
    pools: dict[str, int] = {}
    for r in rows:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
        pools[r["pool"]] = pools.get(r["pool"], 0) + 1
    return kinds, pools


async def test_three_instances_never_exceed_a_kind_cap_or_a_pool_limit(
    stores: list[Store], conn: asyncpg.Connection, settings: Settings
) -> None:
    for kind in ("short", "essay", "code"):
        await enqueue(stores[0], conn, settings, kind, 15, f"hw-{kind}")
    rng = random.Random(29)
    done = 0
    peak_kinds: dict[str, int] = {}
    peak_pools: dict[str, int] = {}
    while done < 45:
        # Three instances, three claims each, all at once.
        jobs = await asyncio.gather(*(claim(s, settings) for s in stores for _ in range(3)))
        kinds, pools = await in_flight(conn)
        for kind, n in kinds.items():
            peak_kinds[kind] = max(peak_kinds.get(kind, 0), n)
            assert n <= KIND_CAPS.get(kind, 99), (kind, n)
        for pool, n in pools.items():
            peak_pools[pool] = max(peak_pools.get(pool, 0), n)
            assert n <= POOL_CAPS[pool], (pool, n)
        for job in jobs:
            if job is not None:
                # The row's pool is its kind's, as the file declares.
                assert job.pool == settings.queue.kind(job.kind).pool
        # Some of what is out comes back.
        out = await conn.fetch("SELECT queue_id, dispatch_seq FROM ai_marking_queue"
                               " WHERE status = 'processing'")
        for row in out:
            if rng.random() < 0.6:
                done_row = Completed(row["queue_id"], row["dispatch_seq"], {"score": 1})
                assert await stores[rng.randrange(3)].complete(done_row,
                                                               plan_of(plan=settings.queue))
                done += 1
    # The caps were reached, not merely respected by an idle queue.
    assert peak_kinds["short"] == 2 and peak_kinds["code"] == 2 and peak_kinds["essay"] >= 1
    assert peak_pools == {"alpha": 3, "beta": 2}


async def test_a_refusal_in_one_pool_holds_no_row_of_another(
    stores: list[Store], conn: asyncpg.Connection, settings: Settings
) -> None:
    store = stores[0]
    await enqueue(store, conn, settings, "essay", 4, "hw-a")
    await enqueue(store, conn, settings, "code", 4, "hw-b")
    first = await claim(store, settings)
    assert first is not None and first.pool == "alpha"
    # The model behind pool alpha refuses for 30 s.
    status = await store.refused(first.queue_id, first.dispatch_seq, kind="rate_limited",
                                 delay=30, give_up=DAY, cap=settings.max_in_flight,
                                 plan=settings.queue.plan)
    assert status == "pending"
    alpha = await store.flow_state(3, 60, "alpha")
    beta = await store.flow_state(4, 60, "beta")
    assert alpha.hold_until is not None and alpha.in_flight_limit == 1
    assert beta.hold_until is None and beta.in_flight_limit == 4  # L of beta: unchanged
    # Beta's rows go at once, up to code's cap; alpha's wait out the hold.
    jobs = [await claim(store, settings) for _ in range(3)]
    assert [j.kind if j else None for j in jobs] == ["code", "code", None]
    ctl = await conn.fetch("SELECT pool, busy_until IS NOT NULL AS held, in_flight_limit,"
                           " refusals_rate_limited FROM ai_queue_control ORDER BY pool")
    assert [tuple(r) for r in ctl] == [("alpha", True, 1, 1), ("beta", False, None, 0),
                                       ("default", False, None, 0)]
    # The next wake-up is alpha's hold: beta's rows wait for nothing but a slot.
    wake = await store.next_wakeup(plan_of(1, THRESHOLD, plan=settings.queue), 600)
    assert wake is not None and 25 < wake <= 30


async def test_a_saturated_kind_delays_another_kind_by_no_chain_step(
    stores: list[Store], conn: asyncpg.Connection, settings: Settings
) -> None:
    store = stores[0]
    # One assignment: the essay comes after 100 short answers in turn order.
    await enqueue(store, conn, settings, "short", 100, "hw-1")
    await enqueue(store, conn, settings, "essay", 1, "hw-1")
    a, b = await claim(store, settings), await claim(store, settings)
    assert a is not None and b is not None and {a.kind, b.kind} == {"short"}
    # short is at its cap: the step that claimed b already knew another row could go.
    assert b.more
    c = await claim(store, settings)
    assert c is not None and c.kind == "essay"
    assert not c.more  # alpha is full (3), and short has no room
    assert await claim(store, settings) is None


async def test_turns_are_a_pools_own(
    stores: list[Store], conn: asyncpg.Connection, settings: Settings
) -> None:
    store = stores[0]
    # Group A's 5 code rows in beta must not push its essays behind group B in alpha.
    await enqueue(store, conn, settings, "code", 5, "A")
    await enqueue(store, conn, settings, "essay", 2, "A")
    await enqueue(store, conn, settings, "essay", 2, "B")
    turns = await conn.fetch("SELECT q.pool, coalesce(q.group_key, q.assignment_id) AS g, q.turn"
                             " FROM ai_marking_queue q WHERE q.kind = 'essay' ORDER BY q.seq")
    assert [(r["g"], r["turn"]) for r in turns] == [("A", 0), ("A", 1), ("B", 0), ("B", 1)]
    groups = await conn.fetch("SELECT pool, group_key, last_turn FROM ai_marking_groups"
                              " ORDER BY pool, group_key")
    assert [tuple(r) for r in groups] == [("alpha", "A", 1), ("alpha", "B", 1), ("beta", "A", 4)]


async def test_a_kind_may_allow_its_own_attempts(
    stores: list[Store], conn: asyncpg.Connection, settings: Settings
) -> None:
    store = stores[0]
    ends: dict[str, list[str | None]] = {"code": [], "short": []}
    for kind in ends:
        await enqueue(store, conn, settings, kind, 1, f"hw-{kind}")
        for _ in range(3):
            job = await claim(store, settings)
            assert job is not None and job.kind == kind
            # Due again at once; an hour once its own kind's rounds are over.
            ends[kind].append(await store.attempt_failed(
                job.queue_id, job.dispatch_seq, delay=0 if len(ends[kind]) < 2 else 3600,
                retryable=True, max_attempts=settings.max_attempts, error="x",
                outcome="dispatch_error", attempts=settings.queue.attempts))
    # code allows 5 attempts (the file), short the default 3 (QUEUE_MAX_ATTEMPTS).
    assert ends == {"code": ["pending"] * 3, "short": ["pending", "pending", "failed"]}


async def test_a_repeated_settle_hands_back_a_row_with_its_kind_and_pool(
    stores: list[Store], conn: asyncpg.Connection, settings: Settings
) -> None:
    # The lost-answer handback (docs/deploying/index.md) of a row outside the default pool.
    store = stores[0]
    await enqueue(store, conn, settings, "code", 3, "hw-c")
    a = await claim(store, settings)
    assert a is not None and (a.kind, a.pool) == ("code", "beta")
    applied, b = await settle_one(store,
                                  Completed(a.queue_id, a.dispatch_seq, {"score": 1}, None),
                                  plan_of(settings.max_in_flight, THRESHOLD, plan=settings.queue))
    assert applied and b is not None
    plan = plan_of(settings.max_in_flight, THRESHOLD, plan=settings.queue)
    again, handed = await settle_one(store, Completed(a.queue_id, a.dispatch_seq, {"score": 9}),
                                     plan)
    assert not again and handed is not None
    assert (handed.queue_id, handed.kind, handed.pool) == (b.queue_id, "code", "beta")


async def test_the_claim_steps_over_an_expired_row_of_a_kind_with_room(
    stores: list[Store], conn: asyncpg.Connection, settings: Settings
) -> None:
    # docs/operating/alerts.md in the pools' walk: an expired row is never dispatched,
    # even before the sweep has ended it, and does not count as `more`.
    store = stores[0]
    await enqueue(store, conn, settings, "essay", 2, "hw-e")
    first = await conn.fetchval("SELECT queue_id FROM ai_marking_queue ORDER BY seq LIMIT 1")
    await conn.execute("UPDATE ai_marking_queue SET expires_at = now() - interval '1 second'"
                       " WHERE queue_id = $1", first)
    job = await claim(store, settings)
    assert job is not None and job.queue_id != first and job.kind == "essay"
    assert not job.more
    assert await claim(store, settings) is None
