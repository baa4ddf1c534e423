"""The per-status count deltas agree with count(*) through every kind of change."""

from __future__ import annotations

import asyncpg

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed
from tests.conftest import add_submissions
from tests.plans import plan_of


async def assert_counts_match(store: Store, conn: asyncpg.Connection) -> None:
    real = {r["status"]: r["n"] for r in await conn.fetch(
        "SELECT status, count(*) AS n FROM ai_marking_queue GROUP BY status")}
    stats = await store.stats()
    for status in ("pending", "processing", "completed", "failed", "cancelled"):
        assert getattr(stats, status) == real.get(status, 0), status
        assert await store.count_rows(status=status, assignment_id=None) == real.get(status, 0)
    assert await store.count_rows(status=None, assignment_id=None) == sum(real.values())


async def test_counts_follow_enqueue_claim_finish_cancel_prune_and_delete(
    db_url: str, conn: asyncpg.Connection
):
    store = Store(await connect_pool(db_url))
    try:
        ids = await add_submissions(conn, 12)
        await store.enqueue(ids, "hw-1", 0, {})
        await assert_counts_match(store, conn)
        jobs = [await store.claim(plan_of(0, 5)) for _ in range(6)]
        await assert_counts_match(store, conn)
        assert all(jobs)
        for job in jobs[:3]:
            assert job is not None
            await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                                 plan_of())
        for job in jobs[3:5]:
            assert job is not None
            await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=False,
                                       max_attempts=3, error="e", outcome="x")
        await assert_counts_match(store, conn)
        await store.cancel_assignment("hw-1", "ops")
        failed = jobs[3]
        assert failed is not None
        await store.retry_failed(failed.queue_id, "ops")
        await conn.execute("UPDATE ai_marking_claimed c SET lease_at = now() - interval '1 hour' "
                           "FROM ai_marking_queue q "
                           "WHERE q.queue_id = c.queue_id AND q.status = 'processing'")
        await store.recover_stuck(60, 3)
        await assert_counts_match(store, conn)
        # Pruning folds the deltas and deletes old completed rows.
        await conn.execute("UPDATE ai_marking_queue SET finished_at = now() - interval '9 days' "
                           "WHERE status = 'completed'")
        before = await conn.fetchval("SELECT count(*) FROM ai_marking_counts")
        assert await store.prune(7 * 86400) == 3
        after = await conn.fetchval("SELECT count(*) FROM ai_marking_counts")
        assert after < before
        await assert_counts_match(store, conn)
        # Deleting a submission cascades to its rows; the counts follow.
        await conn.execute("DELETE FROM submissions WHERE id = ANY($1::uuid[])", ids[6:])
        await assert_counts_match(store, conn)
    finally:
        await store.close()
