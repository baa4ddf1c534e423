"""marking.run_finished exactly once when many transactions end a run's rows at once.

An end that finds another processing row of its run pins it and skips the
claim's advisory lock; only an end that may finish the run takes it (aiqueue
0023, functions/90_outbox.sql: aiqueue_outbox_run_finished).  These tests race real
transactions against a real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from typing import Any

import asyncpg
import pytest

from aiqueue.db.store import Store
from aiqueue.models import Completed
from tests.conftest import add_submissions
from tests.plans import plan_of, settle_one

pytestmark = pytest.mark.store_pool(12)
CAP, THRESHOLD = 0, 5
USAGE = {"model": "m", "prompt_tokens": 10, "completion_tokens": 5}
CLAIM_LOCK = 7301730173017301
COMPLETE = "SELECT aiqueue_complete($1, '{\"score\": 1}'::jsonb, NULL, $2)"


async def run_events(conn: asyncpg.Connection) -> list[dict[str, Any]]:
    rows = await conn.fetch("SELECT body::text AS body FROM ai_marking_outbox "
                            "WHERE type = 'marking.run_finished'")
    return [json.loads(r["body"]) for r in rows]


async def test_an_end_with_another_row_in_flight_leaves_the_claim_lock_free(
    store: Store, db_url: str, conn: asyncpg.Connection
) -> None:
    """The pin, not the lock: claims go on while the end's transaction is open."""
    ids = await add_submissions(conn, 3, "hw-pin")
    await store.enqueue(ids, "hw-pin", 0, {})
    a, b = await store.claim(plan_of(CAP, THRESHOLD)), await store.claim(plan_of(CAP, THRESHOLD))
    assert a and b
    ender, other = await asyncpg.connect(db_url), await asyncpg.connect(db_url)
    try:
        async with ender.transaction():
            assert await ender.fetchval(COMPLETE, a.queue_id, a.dispatch_seq)
            async with other.transaction():
                assert await other.fetchval("SELECT pg_try_advisory_xact_lock($1)", CLAIM_LOCK)
            # The pinned row's own end waits for this transaction.
            racing = asyncio.create_task(other.fetchval(COMPLETE, b.queue_id, b.dispatch_seq))
            await asyncio.sleep(0.3)
            assert not racing.done()
        assert await racing
    finally:
        await ender.close()
        await other.close()
    # A pending row is left: the run has not finished.
    assert await run_events(conn) == []


async def test_an_end_that_may_finish_the_run_takes_the_lock(
    store: Store, db_url: str, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 1, "hw-last")
    await store.enqueue(ids, "hw-last", 0, {})
    job = await store.claim(plan_of(CAP, THRESHOLD))
    assert job
    ender, other = await asyncpg.connect(db_url), await asyncpg.connect(db_url)
    try:
        async with ender.transaction():
            assert await ender.fetchval(COMPLETE, job.queue_id, job.dispatch_seq)
            async with other.transaction():
                assert not await other.fetchval("SELECT pg_try_advisory_xact_lock($1)",
                                                CLAIM_LOCK)
    finally:
        await ender.close()
        await other.close()
    assert len(await run_events(conn)) == 1


async def _end(store: Store, job: Any, how: str) -> None:
    if how == "settle":
        await settle_one(store,
                         Completed(job.queue_id, job.dispatch_seq, {"score": 1}, USAGE),
                         plan_of(CAP, THRESHOLD))
    elif how == "complete":
        await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, USAGE),
                             plan_of())
    else:
        await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=False,
                                   max_attempts=1, error="function_error", outcome="failed")


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
async def test_concurrent_ends_of_many_runs_write_each_run_finished_exactly_once(
    store: Store, conn: asyncpg.Connection, seed: int
) -> None:
    """Results, settles (which claim the next row) and final failures, all at once."""
    rnd = random.Random(seed)
    runs = {f"hw-race-{seed}-{k}": rnd.randint(1, 6) for k in range(8)}
    for assignment, n in runs.items():
        await store.enqueue(await add_submissions(conn, n, assignment), assignment, 0, {})
    while True:
        jobs = [j for j in [await store.claim(plan_of(CAP, THRESHOLD)) for _ in range(12)] if j]
        if not jobs:
            break
        hows = [rnd.choice(["settle", "complete", "fail"]) for _ in jobs]
        await asyncio.gather(*(_end(store, j, h) for j, h in zip(jobs, hows, strict=True)))
        # A settle's claim is sent by nobody here: end those too, next round.
        rows = await conn.fetch("SELECT queue_id, dispatch_seq, assignment_id FROM "
                                "ai_marking_queue WHERE status = 'processing'")
        await asyncio.gather(*(store.complete(Completed(r["queue_id"], r["dispatch_seq"], {"s": 1},
                                                        USAGE), plan_of())
                               for r in rows))
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                               "WHERE status IN ('pending', 'processing')") == 0
    events = await run_events(conn)
    assert Counter(e["assignment_id"] for e in events) == Counter(runs.keys())
    for e in events:
        assert e["completed"] + e["failed"] == runs[e["assignment_id"]]
