"""The caps held by slot rows (docs/architecture.md): claims for different free slots
proceed at once, a held slot keeps its cap, and every end of a dispatch frees it."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed, Job
from tests.conftest import add_submissions
from tests.integration.pools_kit import KIND_CAPS, POOL_CAPS, pools_settings
from tests.plans import plan_of, settle_one

pytestmark = pytest.mark.store_pool(30)
THRESHOLD = 5
# A claim that waits for another's commit fails at once instead of hanging.
NO_WAIT = "SET lock_timeout = '300ms'"
CLAIM = "SELECT * FROM aiqueue_claim($1::jsonb)"


@pytest.fixture
async def other(db_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A second session, as another instance holds one."""
    conn = await asyncpg.connect(db_url)
    await conn.execute(NO_WAIT)
    yield conn
    await conn.close()


async def held_slots(conn: asyncpg.Connection) -> int:
    """Slots whose holder's dispatch is still out (a pool's and a kind's count apart)."""
    return int(await conn.fetchval(
        "SELECT count(*) FROM ai_marking_slots s JOIN ai_marking_claimed c "
        "ON c.queue_id = s.queue_id AND c.dispatch_seq = s.dispatch_seq"))


async def test_two_claims_for_free_slots_of_one_pool_proceed_at_once(
    store: Store, conn: asyncpg.Connection, other: asyncpg.Connection
) -> None:
    for hw in ("hw-1", "hw-2"):
        await store.enqueue(await add_submissions(conn, 3, hw), hw, 0, {})
    plan = plan_of(4, THRESHOLD).json
    async with conn.transaction():
        first = await conn.fetchrow(CLAIM, plan)
        assert first is not None
        # The first claim's transaction is still open: the second takes another
        # free slot of the same pool without waiting for its commit.
        second = await other.fetchrow(CLAIM, plan)
        assert second is not None and second["queue_id"] != first["queue_id"]
        assert second["pool"] == first["pool"] == "default"
        # Turns: the second goes to the group the first is not charging.
        assert second["assignment_id"] != first["assignment_id"]
    assert await held_slots(conn) == 2
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_claimed") == 2


async def test_claims_of_two_pools_proceed_at_once(
    store: Store, conn: asyncpg.Connection, other: asyncpg.Connection
) -> None:
    for kind, pool in (("essay", "alpha"), ("code", "beta")):
        ids = await add_submissions(conn, 2, f"hw-{kind}")
        await store.enqueue(ids, f"hw-{kind}", 0, {}, kind=kind, pool=pool)
    # Each instance's plan names one pool (as two deployments sharing a database).
    alpha, beta = (plan_of(0, THRESHOLD, plan=json.dumps(
        {"pools": [{"name": pool, "cap": 3}], "kinds": [{"name": kind, "pool": pool}]})).json
        for kind, pool in (("essay", "alpha"), ("code", "beta")))
    # The first claim of a pool never met before writes its control row, once,
    # under the claim's lock (10_plan.sql): done here, before the test proper.
    assert await conn.fetchrow(CLAIM, alpha) and await conn.fetchrow(CLAIM, beta)
    async with conn.transaction():
        first = await conn.fetchrow(CLAIM, alpha)
        second = await other.fetchrow(CLAIM, beta)
        assert first is not None and second is not None
        assert (first["pool"], second["pool"]) == ("alpha", "beta")


async def test_a_slot_held_by_an_open_claim_keeps_the_cap(
    store: Store, conn: asyncpg.Connection, other: asyncpg.Connection
) -> None:
    for hw in ("hw-1", "hw-2"):
        await store.enqueue(await add_submissions(conn, 2, hw), hw, 0, {})
    plan = plan_of(1, THRESHOLD).json
    async with conn.transaction():
        assert await conn.fetchrow(CLAIM, plan) is not None
        # Its one slot is taken (not committed yet): no second row, and no wait.
        assert await other.fetchrow(CLAIM, plan) is None
    assert await other.fetchrow(CLAIM, plan) is None
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_claimed") == 1


async def test_a_claim_without_a_free_slot_locks_no_group_and_no_row(
    store: Store, conn: asyncpg.Connection, other: asyncpg.Connection
) -> None:
    await store.enqueue(await add_submissions(conn, 3), "hw-1", 0, {})
    plan = plan_of(1, THRESHOLD)
    assert await store.claim(plan) is not None  # the pool's one slot, held
    async with conn.transaction():
        assert await conn.fetchrow(CLAIM, plan.json) is None
        # Its transaction still open: the group's counter row and the pending rows
        # are free for another claim, a result's correction or an enqueue.
        assert await other.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM ai_marking_fair FOR UPDATE NOWAIT) f") == 1
        assert await other.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM ai_marking_queue WHERE status = 'pending'"
            " FOR UPDATE NOWAIT) q") == 2


async def test_every_end_of_a_dispatch_frees_its_slot(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 6)
    await store.enqueue(ids, "hw-1", 0, {})
    plan = plan_of(1, THRESHOLD)

    async def claim() -> tuple[uuid.UUID, int]:
        job = await store.claim(plan)
        assert job is not None
        assert await store.claim(plan) is None  # the one slot is held
        return job.queue_id, job.dispatch_seq

    qid, seq = await claim()
    assert await store.complete(Completed(qid, seq, {"score": 1}, None), plan)
    qid, seq = await claim()
    await store.attempt_failed(qid, seq, delay=0, retryable=True, max_attempts=3,
                               error="dispatch_failed", outcome="error")
    qid, seq = await claim()
    await store.refused(qid, seq, kind="rate_limited", delay=0, give_up=3600, cap=1)
    await conn.execute("UPDATE ai_queue_control SET busy_until = NULL")
    qid, seq = await claim()
    assert await store.cancel_one(qid, "test") == "processing"
    qid, seq = await claim()
    await conn.execute("UPDATE ai_marking_claimed SET lease_at = now() - interval '1 hour'")
    await store.recover_stuck(60, 3)
    qid, seq = await claim()
    await conn.execute("DELETE FROM ai_marking_queue WHERE queue_id = $1", qid)
    await claim()


async def test_a_lowered_cap_counts_the_dispatches_above_it(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 6)
    await store.enqueue(ids, "hw-1", 0, {})
    jobs = [await store.claim(plan_of(3, THRESHOLD)) for _ in range(3)]
    assert all(jobs)
    # The cap comes down to 2 with slots 1..3 held: the first ends, freeing slot
    # 1, but slot 3 (above the cap) still counts, so nothing more goes.
    first = jobs[0]
    assert first is not None
    assert await store.complete(Completed(first.queue_id, first.dispatch_seq, {"score": 1},
                                          None), plan_of(2, THRESHOLD))
    assert await conn.fetchval("SELECT aiqueue_slot_take('default', '', 2)"
                               ) is None
    assert await store.claim(plan_of(2, THRESHOLD)) is None


async def test_many_claimers_across_pools_and_kinds_never_pass_a_cap(
    conn: asyncpg.Connection, db_url: str, tmp_path: Path
) -> None:
    settings = pools_settings(db_url, tmp_path)
    plan = plan_of(settings.max_in_flight, THRESHOLD, plan=settings.queue)
    stores = [Store(await connect_pool(db_url, max_size=5)) for _ in range(3)]
    try:
        for kind in ("short", "essay", "code"):
            for hw in (f"hw-{kind}-a", f"hw-{kind}-b"):
                ids = await add_submissions(conn, 8, hw)
                await stores[0].enqueue(ids, hw, 0, {}, kind=kind,
                                        pool=settings.queue.kind(kind).pool)
        rng = random.Random(47)
        out: list[Job] = []
        done = 0

        async def check() -> None:
            for table in ("ai_marking_claimed", "ai_marking_queue"):
                where = "WHERE status = 'processing'" if table == "ai_marking_queue" else ""
                rows = await conn.fetch(f"SELECT pool, kind, count(*) AS n FROM {table} "
                                        f"{where} GROUP BY 1, 2")
                pools: dict[str, int] = {}
                for r in rows:
                    pools[r["pool"]] = pools.get(r["pool"], 0) + r["n"]
                    assert r["n"] <= KIND_CAPS.get(r["kind"], 99), dict(r)
                for pool, n in pools.items():
                    assert n <= POOL_CAPS[pool], (pool, n)

        while done < 48:
            # Claims and settles (which claim the next row) from three instances at once.
            calls = [s.claim(plan) for s in stores for _ in range(3)]
            settles = [settle_one(stores[rng.randrange(3)],
                                  Completed(j.queue_id, j.dispatch_seq, {"score": 1}, None),
                                  plan) for j in out]
            out = []
            results = await asyncio.gather(*calls, *settles)
            await check()
            for r in results:
                job = r[1] if isinstance(r, tuple) else r
                if isinstance(r, tuple):
                    done += 1
                if job is not None:
                    out.append(job)
            rng.shuffle(out)
        # Every dispatch still out holds its pool's slot (every pool here has a cap).
        assert await conn.fetchval(
            "SELECT count(*) FROM ai_marking_claimed c WHERE NOT EXISTS ("
            " SELECT 1 FROM ai_marking_slots s WHERE s.pool = c.pool AND s.kind = ''"
            " AND s.queue_id = c.queue_id AND s.dispatch_seq = c.dispatch_seq)") == 0
    finally:
        for s in stores:
            await s.close()


# A pool's cap alone, and a kind's cap alone (its pool uncapped): each is a slot.
ONE_SLOT = {
    "pool": '{"pools": [{"name": "alpha", "cap": 1}],'
            ' "kinds": [{"name": "short", "pool": "alpha"}]}',
    "kind": '{"pools": [{"name": "alpha", "cap": 0}],'
            ' "kinds": [{"name": "short", "pool": "alpha", "cap": 1}]}',
}


@pytest.mark.parametrize("cap", sorted(ONE_SLOT))
async def test_a_dispatch_holds_its_slot_until_an_end_frees_it_as_main_counted_it(
    store: Store, conn: asyncpg.Connection, cap: str
) -> None:
    """What holds a slot and what frees it are what held and freed a count of the
    dispatch's lease row before the slots (ai_marking_claimed): a dispatch out, quiet,
    heartbeating or waiting on its platform's word holds it; its result, a failed attempt
    (the app's dispatch timeout among them: the function may or may not have the job, and
    the retry is the answer, aiqueue/dispatch/invoke.py), the platform's answer or a lease
    gone quiet (docs/guarantees.md#a-dead-invocation) free it.  Store calls only, so the
    test reads the same on a schema without slots (it passes on the one before 0077)."""
    plan = plan_of(plan=ONE_SLOT[cap])
    await store.enqueue(await add_submissions(conn, 5), "hw-1", 0, {}, kind="short",
                        pool="alpha")

    async def claim() -> Job:
        job = await store.claim(plan)
        assert job is not None
        assert await store.claim(plan) is None, "the slot is held"
        return job

    async def quiet_for_an_hour() -> None:
        await conn.execute("UPDATE ai_marking_claimed SET lease_at = now() - interval '1 hour'")
        await conn.execute("UPDATE ai_marking_queue SET started_at = now() - interval '1 hour'"
                           " WHERE status = 'processing'")

    async def held() -> None:
        assert await store.claim(plan) is None, "the slot is held"

    job = await claim()
    # Its heartbeat keeps the lease: recovery leaves it, the slot stays held.
    await quiet_for_an_hour()
    assert await store.heartbeat(job.queue_id, job.dispatch_seq, {"current": 1})
    assert await store.recover_stuck(60, 3, heartbeat=60) == 0
    await held()
    # Its result frees it.
    assert await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                                plan)
    job = await claim()
    # The app's dispatch timed out (handout.refused): a failed attempt frees it.
    assert await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=True,
                                      max_attempts=3, error="dispatch_timeout",
                                      outcome="dispatch_error") == "pending"
    job = await claim()
    # An invocation the platform is asked about: quiet, it is left to the platform,
    # held while the platform says it still runs; its answer (failed) frees it.
    await store.set_dispatch_ref(job.queue_id, job.dispatch_seq, "activation-1")
    await quiet_for_an_hour()
    assert await store.recover_stuck(60, 3, ask=True) == 0
    await held()
    await store.platform_waits(job.queue_id, job.dispatch_seq, "still_running", 60, 3600)
    await held()
    assert await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=True,
                                      max_attempts=3, error="activation_failed",
                                      outcome="activation_failed") is not None
    await store.platform_said(job.queue_id, job.dispatch_seq, "activation_failed")
    job = await claim()
    # A lease gone quiet with no heartbeat: recovery frees it (a dead invocation).
    await quiet_for_an_hour()
    assert await store.recover_stuck(60, 3) == 1
    await claim()
