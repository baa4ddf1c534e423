"""The per-job and per-tick statements read the record's live part alone (aiqueue 0078,
docs/architecture.md#the-record-live-rows-and-ended-months): with a year of months of
ended rows, an enqueue and its dry run, a heartbeat, a failed attempt, a refusal (its
charge given back), a refusal or failure of a stale dispatch, the wake-up's lease and
scheduled terms, the recovery sweep and its looks, a calibration gate still shut, and the prune and
retention between their runs lock no month.
A slot still held for a row a late result completed is the one case that reads the
months, and it is still counted and freed."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from aiqueue.db.gateway import queries
from aiqueue.db.store import Store
from aiqueue.models import Completed, Job
from aiqueue.settings.money import NO_MONEY
from tests.conftest import add_submissions
from tests.integration.partitions_kit import month_start, partitions
from tests.plans import plan_of

# The test makes months: a new copy of the template.
pytestmark = pytest.mark.fresh_db

MONTHS = 12
LEASE = 600.0
SWEEP: tuple[Any, ...] = (LEASE, 3, LEASE, None, False, "{}", None, [])  # recover_stuck
# Relation locks this session holds on a month of ended rows, or an index of one.
MONTH_LOCKS = r"""
SELECT count(*) FROM pg_locks l
JOIN pg_class c ON c.oid = l.relation
LEFT JOIN pg_index i ON i.indexrelid = c.oid
LEFT JOIN pg_class t ON t.oid = i.indrelid
WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation'
  AND coalesce(t.relname, c.relname) LIKE 'ai\_marking\_queue\_ended\_%'
"""


async def months_locked(conn: asyncpg.Connection, name_or_sql: str, *args: Any) -> int:
    """Relation locks on months of ended rows (or their indexes) that one run of a statement
    (a named query, or SQL) holds, the run rolled back: the most of its first run (planned
    anew) and of its seventh (its plan cached, as the loop's connections run it)."""
    sql = queries().get(name_or_sql, name_or_sql)
    most = 0
    for run in range(7):
        tr = conn.transaction()
        await tr.start()
        try:
            await conn.fetch(sql, *args)
            if run in (0, 6):
                most = max(most, int(await conn.fetchval(MONTH_LOCKS)))
        finally:
            await tr.rollback()
    return most


@pytest.fixture
async def year(conn: asyncpg.Connection) -> AsyncIterator[None]:
    """A month of ended rows for this month and each of the year before it (in place of
    the upgrade's one partition of everything before next month, empty here)."""
    for name, (lower, _) in (await partitions(conn, "ai_marking_queue_ended")).items():
        if lower is None and not name.endswith("_default"):
            await conn.execute(f"ALTER TABLE ai_marking_queue_ended DETACH PARTITION {name}")
            await conn.execute(f"DROP TABLE {name}")
    at = month_start(datetime.now(UTC))
    for _ in range(MONTHS + 1):
        assert await conn.fetchval(
            "SELECT aiqueue_partition_add('ai_marking_queue_ended'::regclass, 'created_at',"
            " 'queue_id', $1::timestamp)", at.replace(tzinfo=None))
        at = month_start(at - timedelta(days=1))
    yield


async def dispatched(store: Store, conn: asyncpg.Connection, n: int = 1) -> list[Job]:
    """n rows claimed (processing, each holding a slot), an ended one beside them."""
    assignment = f"hw-{uuid.uuid4().hex[:6]}"
    await store.enqueue(await add_submissions(conn, n + 1, assignment), assignment, 0, {})
    jobs = []
    for _ in range(n + 1):
        job = await store.claim(plan_of(0, 5))
        assert job is not None
        jobs.append(job)
    ended = jobs.pop()
    assert await store.complete(Completed(ended.queue_id, ended.dispatch_seq, {"score": 1}, None),
                                plan_of())
    return jobs


async def test_the_per_job_and_per_tick_statements_lock_no_month_of_ended_rows(
    store: Store, conn: asyncpg.Connection, year: None
) -> None:
    job, stale = await dispatched(store, conn, 2)
    # The detector sees a statement that names the record unpruned.
    assert await months_locked(conn, "SELECT 1 FROM ai_marking_queue q WHERE q.queue_id = $1",
                               job.queue_id) > 0
    plan = plan_of(0, 5).json
    qid, seq = job.queue_id, job.dispatch_seq
    stale_seq = stale.dispatch_seq + 1  # no longer the row's current dispatch
    new = await add_submissions(conn, 3, "hw-new")
    enqueue = (new, "hw-new", 0, "{}", "hw-new", False, "mark", "default", None, None,
               None, None, False, "live")
    dry_run = (new, "hw-new", False, "hw-new", "default", NO_MONEY.json(), None, None, "mark",
               "{}", False, "live")
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("enqueue", enqueue),
        ("dry_run", dry_run),
        ("heartbeat", (qid, seq, json.dumps({"current": 1}))),
        ("attempt_failed", (qid, seq, 5.0, True, 3, "x", "dispatch_error", "{}")),
        ("attempt_failed", (stale.queue_id, stale_seq, 5.0, True, 3, "x", "x", "{}")),
        # A refusal gives the dispatch's charge back (aiqueue_money_refund).
        ("refused", (qid, seq, "rate_limited", 5.0, 600.0, 4, None, None)),
        ("refused", (stale.queue_id, stale_seq, "rate_limited", 5.0, 600.0, 4, None, None)),
        ("next_wakeup", (plan, LEASE, LEASE, None, False, LEASE)),
        ("recover_stuck", SWEEP),
        ("take_lookups", (LEASE, LEASE, LEASE, 5, 30.0, None, [])),
        ("platform_waits", (qid, seq, "still_running", 30.0, LEASE)),
        ("expire_rows", ()),
        ("next_expiry", ()),
        ("next_scheduled", ()),
        # The overnight lane's failed lines (this row is in no batch: nothing moves).
        ("batch_lines_failed", ([qid], [seq], ["x"], [True], 3, 3600.0, "{}")),
    ]
    assert await conn.fetchval("SELECT charged_tokens IS NOT NULL FROM ai_marking_queue"
                               " WHERE queue_id = $1", qid)
    # A run whose calibration rows are not all ended yet (each end and the housekeeping's
    # sweep ask): it is not ready.
    run = await conn.fetchval("UPDATE ai_marking_queue SET calibration = true"
                              " WHERE queue_id = $1 RETURNING run_id", stale.queue_id)
    calls.append(("SELECT aiqueue_calibration_ready($1)", (run,)))
    locked = [(name, await months_locked(conn, name, *args)) for name, args in calls]
    assert locked == [(name, 0) for name, _ in calls]
    # Quiet for longer than the lease: the sweep recovers the rows, still in the live part.
    await conn.execute("UPDATE ai_marking_claimed SET lease_at = now() - interval '1 hour'")
    await conn.execute("UPDATE ai_marking_queue SET started_at = now() - interval '1 hour'"
                       " WHERE status = 'processing'")
    assert await months_locked(conn, "recover_stuck", *SWEEP) == 0
    assert await months_locked(conn, "next_wakeup", plan, LEASE, LEASE, None, False, LEASE) == 0


async def late_completed(store: Store, conn: asyncpg.Connection) -> Job:
    """A row a late result of its first dispatch completed while its second was out: the
    second dispatch still holds its slot (aiqueue_complete)."""
    [first] = await dispatched(store, conn)
    assert await store.attempt_failed(first.queue_id, first.dispatch_seq, delay=0,
                                      retryable=True, max_attempts=3, error="x",
                                      outcome="dispatch_error") == "pending"
    second = await store.claim(plan_of(0, 5))
    assert second is not None and second.queue_id == first.queue_id
    assert await store.complete(Completed(first.queue_id, first.dispatch_seq, {"score": 2}, None),
                                plan_of())
    held = await conn.fetchval("SELECT dispatch_seq FROM ai_marking_claimed WHERE queue_id = $1",
                               second.queue_id)
    assert held == second.dispatch_seq
    return second


async def freed(conn: asyncpg.Connection, job: Job, name: str, *args: Any) -> bool:
    """Whether one run of `name` (rolled back) freed the slot of `job`'s dispatch."""
    tr = conn.transaction()
    await tr.start()
    try:
        await conn.fetch(queries()[name], *args)
        return not await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM ai_marking_claimed WHERE queue_id = $1"
            " AND dispatch_seq = $2)", job.queue_id, job.dispatch_seq)
    finally:
        await tr.rollback()


async def test_a_slot_held_for_a_row_a_late_result_completed_is_counted_and_freed(
    store: Store, conn: asyncpg.Connection, year: None
) -> None:
    job = await late_completed(store, conn)
    plan = plan_of(0, 5).json
    # Its lease is the next wake-up (no other row is due or dispatched).
    wake = await conn.fetchval(queries()["next_wakeup"], plan, LEASE, LEASE, None, False, LEASE)
    assert wake is not None and LEASE - 60 < wake <= LEASE
    # Its dispatch's failure or refusal frees it; a failure of another dispatch does not.
    args = (job.queue_id, job.dispatch_seq)
    assert await freed(conn, job, "attempt_failed", *args, 0.0, True, 3, "x", "x", "{}")
    assert not await freed(conn, job, "attempt_failed", job.queue_id, job.dispatch_seq + 1,
                           0.0, True, 3, "x", "x", "{}")
    assert await freed(conn, job, "refused", *args, "rate_limited", 5.0, 600.0, 4, None, None)
    # The result of its dispatch (nothing applied: the row is completed) frees it; a
    # repeat of the late one does not.
    result = json.dumps({"score": 2})
    assert await freed(conn, job, "complete", job.queue_id, result, None, job.dispatch_seq,
                       plan_of().json)
    assert not await freed(conn, job, "complete", job.queue_id, result, None,
                           job.dispatch_seq - 1, plan_of().json)
    # The sweep frees it once its lease has run out, not before.
    assert not await freed(conn, job, "recover_stuck", *SWEEP)
    await conn.execute("UPDATE ai_marking_claimed SET lease_at = now() - interval '1 hour'"
                       " WHERE queue_id = $1", job.queue_id)
    await conn.execute("UPDATE ai_marking_queue SET started_at = now() - interval '1 hour'"
                       " WHERE queue_id = $1", job.queue_id)
    wake = await conn.fetchval(queries()["next_wakeup"], plan, LEASE, LEASE, None, False, LEASE)
    assert wake is not None and wake <= 0
    assert await freed(conn, job, "recover_stuck", *SWEEP)


async def test_the_prune_and_retention_plan_no_month_while_their_gates_are_shut(
        store: Store, conn: asyncpg.Connection, db_url: str):
    """An instance asks every second; they delete once a minute, and planning their
    statements locks every month of the tables they delete from."""
    await conn.execute("UPDATE ai_queue_control SET last_prune_at = now(), last_retain_at = now(),"
                       " last_partitions_at = now() WHERE id = 1")
    holder = await asyncpg.connect(db_url)
    try:
        async with holder.transaction():
            # A month nobody may read: a statement that plans it waits.
            await holder.execute("LOCK TABLE ai_marking_queue_ended_default IN ACCESS EXCLUSIVE"
                                 " MODE")
            assert await asyncio.wait_for(store.prune(3600), 10) == 0
            assert not (await asyncio.wait_for(store.retain(3600, 3600), 10)).ran
    finally:
        await holder.close()
