"""Claims, settles, failures and enqueues of the same groups at once (docs/architecture.md):
a claim waits for a group another transaction is charging until that one ends, yet
no cycle of waits forms (no deadlock error), no cap is passed and every row is
applied exactly once."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable
from typing import Any

import asyncpg
import pytest

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed, Job
from tests.conftest import add_submissions
from tests.plans import Budget, plan_of, settle_one

pytestmark = pytest.mark.store_pool(30)
CAP, THRESHOLD = 12, 5
GROUPS = "ABCDE"
# The plain claim (no lock but its rows), and one with a declared budget (it takes
# the claim's advisory lock first and waits for counter rows holding it).
PLANS = {"plain": plan_of(CAP, THRESHOLD),
         "budget": plan_of(CAP, THRESHOLD, budget=Budget(tokens_per_minute=10**9))}


async def in_flight(conn: asyncpg.Connection) -> int:
    leases = await conn.fetchval("SELECT count(*) FROM ai_marking_claimed")
    processing = await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE status = 'processing'")
    return max(int(leases), int(processing))


@pytest.mark.parametrize("rules", sorted(PLANS))
async def test_claims_settles_failures_and_enqueues_of_the_same_groups_at_once(
    conn: asyncpg.Connection, db_url: str, rules: str
) -> None:
    plan = PLANS[rules]
    stores = [Store(await connect_pool(db_url, max_size=6)) for _ in range(3)]
    rng = random.Random(47)
    total = 0

    async def enqueue(group: str, n: int) -> Awaitable[Any]:
        """The enqueue of n new submissions of `group`, to run (their rows written first)."""
        nonlocal total
        ids = await add_submissions(conn, n, assignment_id=group)
        total += n
        return stores[rng.randrange(3)].enqueue(ids, group, 0, {})

    try:
        for g in GROUPS:
            await (await enqueue(g, 4))
        out: list[Job] = []
        for step in range(40):
            calls: list[Awaitable[Any]] = [stores[rng.randrange(3)].claim(plan)
                                           for _ in range(CAP)]
            for i, job in enumerate(out):
                store = stores[rng.randrange(3)]
                if i % 5 == 4:  # a failure with attempts left: its row rejoins its group
                    calls.append(store.attempt_failed(
                        job.queue_id, job.dispatch_seq, delay=0, retryable=True,
                        max_attempts=99, error="dispatch_failed", outcome="error"))
                else:  # a settle: the result, its corrections, then the next claim
                    calls.append(settle_one(
                        store, Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                        plan))
            if step < 30:  # rows join groups that are being charged meanwhile
                calls += [await enqueue(rng.choice(GROUPS), 2) for _ in range(2)]
            out = []
            # A deadlock (or any other error) fails the test here.
            for r in await asyncio.gather(*calls):
                job = r[1] if isinstance(r, tuple) else r
                if isinstance(job, Job):
                    out.append(job)
            assert await in_flight(conn) <= CAP
            rng.shuffle(out)
        while out or await conn.fetchval(
                "SELECT count(*) FROM ai_marking_queue WHERE status <> 'completed'"):
            results = await asyncio.gather(
                *[stores[0].claim(plan) for _ in range(CAP)],
                *[settle_one(stores[1], Completed(j.queue_id, j.dispatch_seq, {"score": 1},
                                                  None), plan) for j in out])
            out = [j for r in results for j in ([r[1]] if isinstance(r, tuple) else [r])
                   if j is not None]
            assert await in_flight(conn) <= CAP
        # Every row applied exactly once.
        assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == total
        assert await conn.fetchval("SELECT count(*) FROM ai_marking_results") == total
        assert await conn.fetchval(
            "SELECT count(DISTINCT queue_id) FROM ai_marking_results") == total
    finally:
        for s in stores:
            await s.close()
