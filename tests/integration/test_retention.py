"""Retention against a real PostgreSQL: exactly the rows past their period go."""

from __future__ import annotations

import uuid
from datetime import timedelta

import asyncpg

from aiqueue.db.store import Store
from aiqueue.models import Completed
from aiqueue.records.retention import periods
from aiqueue.settings import Settings
from tests.conftest import add_submissions
from tests.plans import plan_of

CAP, THRESHOLD = 0, 5
DAY = 86400.0
ENDED, HISTORY = 30 * DAY, 365 * DAY


async def ended_rows(store: Store, conn: asyncpg.Connection, n: int,
                     status: str) -> list[uuid.UUID]:
    """n rows that ended in `status`, each with an attempt line (failed: one dispatch)."""
    assignment = f"hw-{status}-{uuid.uuid4().hex[:6]}"
    ids = await add_submissions(conn, n, assignment)
    await store.enqueue(ids, assignment, 0, {})
    rows = await conn.fetch("SELECT queue_id FROM ai_marking_queue WHERE assignment_id = $1",
                            assignment)
    qids = [r["queue_id"] for r in rows]
    if status == "cancelled":
        await store.cancel_assignment(assignment, "t")
    else:
        for _ in qids:
            job = await store.claim(plan_of(CAP, THRESHOLD))
            assert job is not None
            if status == "failed":
                await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0,
                                           retryable=False, max_attempts=3, error="e",
                                           outcome="failed")
            else:
                await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                                     plan_of())
    return qids


async def age(conn: asyncpg.Connection, qids: list[uuid.UUID], days: float) -> None:
    """Move rows, their attempts and results `days` into the past."""
    back = timedelta(days=days)
    await conn.execute("UPDATE ai_marking_queue SET finished_at = finished_at - $2::interval, "
                       "created_at = created_at - $2::interval WHERE queue_id = ANY($1)",
                       qids, back)
    await conn.execute("UPDATE ai_marking_attempts SET started_at = started_at - $2::interval "
                       "WHERE queue_id = ANY($1)", qids, back)
    await conn.execute("UPDATE ai_marking_results SET applied_at = applied_at - $2::interval "
                       "WHERE queue_id = ANY($1)", qids, back)


async def count(conn: asyncpg.Connection, table: str, qids: list[uuid.UUID]) -> int:
    return int(await conn.fetchval(f"SELECT count(*) FROM {table} WHERE queue_id = ANY($1)",
                                   qids))


async def test_ended_rows_past_their_period_go_in_batches_and_nothing_younger(
    store: Store, conn: asyncpg.Connection
):
    failed = await ended_rows(store, conn, 3, "failed")
    cancelled = await ended_rows(store, conn, 2, "cancelled")
    young_failed = await ended_rows(store, conn, 2, "failed")
    await age(conn, failed + cancelled, 31)
    await age(conn, young_failed, 29)
    outbox_before = await conn.fetchval("SELECT count(*) FROM ai_marking_outbox")

    # Batches of 2: the five old rows take three passes, then nothing is left to do.
    passes = [await store.retain(ENDED, HISTORY, batch=2, every_seconds=0) for _ in range(4)]
    assert [p.ended for p in passes] == [2, 2, 1, 0]
    assert await count(conn, "ai_marking_queue", failed + cancelled) == 0
    assert await count(conn, "ai_marking_attempts", failed + cancelled) == 0
    assert await count(conn, "ai_marking_queue", young_failed) == 2
    # Pruning notifies nobody: no run_finished, no row_failed.
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_outbox") == outbox_before
    # The stats' counts follow the deletions.
    counted = await conn.fetchval(
        "SELECT sum(n) FROM ai_marking_counts WHERE status IN ('failed', 'cancelled')")
    assert counted == 2


async def test_completed_rows_keep_to_the_prune_and_results_to_the_history_period(
    store: Store, conn: asyncpg.Connection
):
    old = await ended_rows(store, conn, 2, "completed")
    young = await ended_rows(store, conn, 1, "completed")
    await age(conn, old, 366)
    await age(conn, young, 364)
    done = await store.retain(ENDED, HISTORY, batch=100, every_seconds=0)
    # A completed row is not an "ended" row: QUEUE_PRUNE_AFTER_DAYS prunes it.
    assert done.ended == 0
    assert done.results == 2
    assert await count(conn, "ai_marking_results", old) == 0
    assert await count(conn, "ai_marking_results", young) == 1
    # Attempt history past the period goes even while its row is kept.
    assert done.attempts == 2
    assert await count(conn, "ai_marking_attempts", old) == 0
    assert await count(conn, "ai_marking_attempts", young) == 1
    # The host's marks are the host's: retention never touches submissions.
    assert await conn.fetchval("SELECT count(*) FROM submissions WHERE ai_result IS NOT NULL") == 3


async def test_a_pass_runs_at_most_once_per_period_across_callers(
    store: Store, conn: asyncpg.Connection
):
    failed = await ended_rows(store, conn, 2, "failed")
    await age(conn, failed, 40)
    first = await store.retain(ENDED, HISTORY, batch=1, every_seconds=60)
    second = await store.retain(ENDED, HISTORY, batch=1, every_seconds=60)
    assert (first.ran, first.ended) == (True, 1)
    assert (second.ran, second.ended) == (False, 0)


def test_the_page_lists_every_period_from_the_settings():
    s = Settings(prune_after_days=7, retain_ended_days=30, retain_history_days=365)
    kept = {k.note.split(";")[0]: k.days for k in periods(s) if k.note.startswith("QUEUE_")}
    assert kept == {"QUEUE_PRUNE_AFTER_DAYS": 7, "QUEUE_RETAIN_ENDED_DAYS": 30,
                    "QUEUE_RETAIN_HISTORY_DAYS": 365}


async def test_expired_rows_go_after_the_ended_period_too(store: Store, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 2, "hw-exp")
    await store.enqueue(ids, "hw-exp", 0, {})
    await conn.execute("UPDATE ai_marking_queue SET status = 'expired', last_error = 'expired', "
                       "finished_at = now() - interval '31 days' WHERE submission_id = $1", ids[0])
    await conn.execute("UPDATE ai_marking_queue SET status = 'expired', last_error = 'expired', "
                       "finished_at = now() - interval '29 days' WHERE submission_id = $1", ids[1])
    assert (await store.retain(ENDED, HISTORY, batch=10, every_seconds=0)).ended == 1
    left = await conn.fetch("SELECT submission_id FROM ai_marking_queue")
    assert [r["submission_id"] for r in left] == [ids[1]]
