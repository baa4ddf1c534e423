"""The pending rows' own table (ai_marking_ready, migration 0067): it holds exactly the
record's pending rows whoever wrote them, and the record's claim and retry updates
are heap-only (docs/architecture.md)."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed
from tests.conftest import add_submissions
from tests.plans import plan_of

# What ai_marking_ready mirrors of each pending row.
MIRRORED = """SELECT q.queue_id, q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS grp,
       q.kind, q.turn, q.seq, q.run_after, q.lane, q.not_before, q.expires_at, q.leader_id,
       q.run_kind FROM ai_marking_queue q WHERE q.status = 'pending' ORDER BY 1"""
READY = """SELECT queue_id, pool, priority, grp, kind, turn, seq, run_after, lane, not_before,
       expires_at, leader_id, run_kind FROM ai_marking_ready ORDER BY 1"""


async def assert_ready_is_pending(conn: asyncpg.Connection) -> None:
    assert [tuple(r) for r in await conn.fetch(READY)] == \
        [tuple(r) for r in await conn.fetch(MIRRORED)]


async def test_ready_holds_exactly_the_pending_rows_after_a_mixed_run(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 12)
    await store.enqueue(ids[:8], "hw-1", 0, {}, group="g")
    await store.enqueue(ids[8:], "hw-2", 1, {}, kind="mark", not_before=None)
    await assert_ready_is_pending(conn)
    jobs = [await store.claim(plan_of(0, 5)) for _ in range(6)]
    claimed = [j for j in jobs if j is not None]
    assert len(claimed) == 6
    await assert_ready_is_pending(conn)
    # A result, a retryable failure (back to pending, due later), a final failure.
    a, b, c, d = claimed[:4]
    assert await store.complete(Completed(a.queue_id, a.dispatch_seq, {"score": 1}, None),
                                plan_of())
    assert await store.attempt_failed(b.queue_id, b.dispatch_seq, delay=60, retryable=True,
                                      max_attempts=3, error="x",
                                      outcome="dispatch_error") == "pending"
    assert await store.attempt_failed(c.queue_id, c.dispatch_seq, delay=0, retryable=False,
                                      max_attempts=3, error="x",
                                      outcome="callback_failed") == "failed"
    await assert_ready_is_pending(conn)
    # A manual retry, a cancel of one row and of an assignment's rest.
    assert await store.retry_failed(c.queue_id, "t")
    assert await store.cancel_one(d.queue_id, "t") is not None
    assert await store.cancel_assignment("hw-2", "t") >= 0
    await assert_ready_is_pending(conn)
    # Host SQL: a pending row's columns and statuses set by hand, rows inserted and
    # deleted directly.
    await conn.execute("UPDATE ai_marking_queue SET run_after = now() + interval '1 hour',"
                       " priority = 5, group_key = 'h' WHERE queue_id = $1", b.queue_id)
    await conn.execute("UPDATE ai_marking_queue SET status = 'pending' WHERE queue_id = $1",
                       claimed[4].queue_id)
    await conn.execute("UPDATE ai_marking_queue SET status = 'failed' WHERE status = 'pending'"
                       " AND queue_id IN (SELECT queue_id FROM ai_marking_queue"
                       " WHERE status = 'pending' AND queue_id <> $1 LIMIT 2)", b.queue_id)
    more = await add_submissions(conn, 3)
    await conn.execute(
        "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status)"
        " SELECT id, 'hw-3', gen_random_uuid(), s FROM unnest($1::uuid[]) WITH ORDINALITY"
        " AS x (id, k), LATERAL (SELECT CASE WHEN k = 1 THEN 'completed' ELSE 'pending' END) v (s)",
        more)
    await assert_ready_is_pending(conn)
    await conn.execute("DELETE FROM ai_marking_queue WHERE assignment_id = 'hw-3'")
    await assert_ready_is_pending(conn)


async def _counters(conn: asyncpg.Connection) -> tuple[int, int]:
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    # The record's months' counters, summed (aiqueue 0078).
    row = await conn.fetchrow("SELECT sum(n_tup_upd) AS n_tup_upd, sum(n_tup_hot_upd) AS"
                              " n_tup_hot_upd FROM pg_stat_user_tables s"
                              " JOIN pg_partition_tree('ai_marking_queue') p ON p.relid = s.relid")
    return int(row["n_tup_upd"]), int(row["n_tup_hot_upd"])


@pytest.mark.parametrize("jobs", [20])
async def test_a_claim_and_a_retry_update_the_record_heap_only(
    db_url: str, conn: asyncpg.Connection, jobs: int
) -> None:
    # One connection, so that its counters can be flushed before they are read
    # (PostgreSQL reports a backend's table statistics lazily).
    # A heap-only update also needs room on its row's page, and a page is pruned only of
    # versions no snapshot still sees (another test's open transaction holds them): room
    # for every version made here, so that only the indexes decide (docs/architecture.md).
    for part in await conn.fetch("SELECT relid::text FROM pg_partition_tree('ai_marking_queue')"
                                 " WHERE isleaf"):
        await conn.execute(f"ALTER TABLE {part[0]} SET (fillfactor = 10)")
    store = Store(await connect_pool(db_url, max_size=1))
    try:
        await store.enqueue(await add_submissions(conn, jobs), "hw-1", 0, {})
        await store.enqueue(await add_submissions(conn, 1), "hw-2", 0, {})
        await store.db.read(lambda c: c.execute("SELECT pg_stat_force_next_flush()"))
        before = await _counters(conn)
        claimed: list[uuid.UUID] = []
        for _ in range(jobs):
            job = await store.claim(plan_of(0, 5))
            assert job is not None
            claimed.append(job.queue_id)
            assert await store.complete(
                Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None), plan_of())
        await store.db.read(lambda c: c.execute("SELECT pg_stat_force_next_flush()"))
        middle = await _counters(conn)
        # A retry back to pending: its row stays live, as a claim leaves it.
        job = await store.claim(plan_of(0, 5))
        assert job is not None
        assert await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=60,
                                          retryable=True, max_attempts=3, error="x",
                                          outcome="dispatch_error") == "pending"
        await store.db.read(lambda c: c.execute("SELECT pg_stat_force_next_flush()"))
        after = await _counters(conn)
    finally:
        await store.close()
    updates, hot = middle[0] - before[0], middle[1] - before[1]
    # Each job: its claim (heap-only: the row stays in the live phase); its result
    # moves the row to its month (a delete and an insert, no update: aiqueue 0078).
    assert updates == jobs
    assert hot == jobs
    assert after[0] - middle[0] == after[1] - middle[1] == 2
