"""The notification outbox against a real PostgreSQL: which changes write which event.

Every event is written by a trigger in the transaction of the change that causes
it (db/sql/functions/90_outbox.sql, aiqueue_outbox_on_end); these tests drive the queue
through the Store's own statements and read the outbox.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import asyncpg

from aiqueue.db.store import Store
from aiqueue.models import Completed
from aiqueue.wire.events import RowFailed, RunFinished
from tests.conftest import add_submissions
from tests.plans import plan_of

CAP, THRESHOLD = 0, 5
USAGE = {"model": "m", "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.25}
RUN_KEYS = {"type", "assignment_id", "run_id", "completed", "failed", "cancelled", "expired",
            "tokens",
            "cost_usd", "started_at", "finished_at"}
ROW_KEYS = {"type", "queue_id", "submission_id", "assignment_id", "error"}


async def events(conn: asyncpg.Connection, kind: str | None = None) -> list[dict[str, Any]]:
    rows = await conn.fetch("SELECT body::text AS body FROM ai_marking_outbox "
                            "WHERE $1::text IS NULL OR type = $1 ORDER BY created_at, id", kind)
    return [json.loads(r["body"]) for r in rows]


async def claim_all(store: Store, n: int) -> list[Any]:
    jobs = [await store.claim(plan_of(CAP, THRESHOLD)) for _ in range(n)]
    assert all(jobs)
    return jobs


async def test_completing_the_last_row_finishes_the_run_once(
    store: Store, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 2, "hw-n")
    await store.enqueue(ids, "hw-n", 0, {})
    a, b = await claim_all(store, 2)
    assert await store.complete(Completed(a.queue_id, a.dispatch_seq, {"score": 1}, USAGE),
                                plan_of())
    assert await events(conn) == []
    assert await store.complete(Completed(b.queue_id, b.dispatch_seq, {"score": 2}, USAGE),
                                plan_of())
    # A repeated result changes nothing, and writes nothing either.
    assert not await store.complete(Completed(b.queue_id, b.dispatch_seq, {"score": 2}, USAGE),
                                    plan_of())
    [run] = await events(conn)
    assert set(run) == RUN_KEYS
    RunFinished.model_validate(run)  # the notification is what the description says
    assert run["type"] == "marking.run_finished" and run["assignment_id"] == "hw-n"
    assert (run["completed"], run["failed"], run["cancelled"]) == (2, 0, 0)
    assert run["tokens"] == 30 and run["cost_usd"] == 0.5
    assert run["started_at"] <= run["finished_at"]
    run_id = await conn.fetchval("SELECT DISTINCT run_id FROM ai_marking_queue")
    assert run["run_id"] == str(run_id)


async def test_final_failure_writes_row_failed_and_a_retryable_one_nothing(
    store: Store, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 2, "hw-f")
    await store.enqueue(ids, "hw-f", 0, {})
    a, b = await claim_all(store, 2)
    assert await store.attempt_failed(a.queue_id, a.dispatch_seq, delay=0, retryable=True,
                                      max_attempts=3, error="model_timeout",
                                      outcome="failed") == "pending"
    assert await events(conn) == []
    assert await store.attempt_failed(b.queue_id, b.dispatch_seq, delay=0, retryable=False,
                                      max_attempts=3, error="bad_request",
                                      outcome="failed") == "failed"
    [failed] = await events(conn)
    assert failed == {"type": "marking.row_failed", "queue_id": str(b.queue_id),
                      "submission_id": str(b.submission_id), "assignment_id": "hw-f",
                      "error": "bad_request"}
    assert set(failed) == ROW_KEYS
    RowFailed.model_validate(failed)
    # The retried row ends the run when it completes: counts cover both rows.
    [again] = await claim_all(store, 1)
    await store.complete(Completed(again.queue_id, again.dispatch_seq, {"score": 3}, None),
                         plan_of())
    [run] = await events(conn, "marking.run_finished")
    assert (run["completed"], run["failed"], run["cancelled"]) == (1, 1, 0)
    assert run["tokens"] == 0 and run["cost_usd"] is None


async def test_stuck_recovery_with_no_attempts_left_fails_the_row_and_ends_the_run(
    store: Store, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 1, "hw-s")
    await store.enqueue(ids, "hw-s", 0, {})
    [job] = await claim_all(store, 1)
    await conn.execute("UPDATE ai_marking_claimed SET lease_at = now() - interval '1 hour'")
    assert await store.recover_stuck(60, 1) == 1
    kinds = sorted(e["type"] for e in await events(conn))
    assert kinds == ["marking.row_failed", "marking.run_finished"]
    assert (await events(conn, "marking.row_failed"))[0]["error"] == "stuck_no_result"
    assert (await events(conn, "marking.row_failed"))[0]["queue_id"] == str(job.queue_id)


async def test_cancelling_the_rest_ends_the_run_with_one_event_once_nothing_runs(
    store: Store, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 50, "hw-c")
    await store.enqueue(ids, "hw-c", 0, {})
    [job] = await claim_all(store, 1)
    assert await store.cancel_assignment("hw-c", "api") == 49
    assert await events(conn) == []  # one row is still processing
    await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, USAGE), plan_of())
    [run] = await events(conn)
    assert (run["completed"], run["failed"], run["cancelled"]) == (1, 0, 49)
    # Cancelling every row of a run at once: one event, not one per row.
    more = await add_submissions(conn, 30, "hw-c2")
    await store.enqueue(more, "hw-c2", 0, {})
    assert await store.cancel_assignment("hw-c2", "api") == 30
    runs = [e for e in await events(conn, "marking.run_finished") if e["assignment_id"] == "hw-c2"]
    assert len(runs) == 1 and runs[0]["cancelled"] == 30


async def test_two_transactions_ending_a_runs_last_rows_at_once_write_exactly_one_event(
    store: Store, db_url: str, conn: asyncpg.Connection
):
    """Each sees the other's row still live: without serialising, neither would write it."""
    ids = await add_submissions(conn, 2, "hw-r")
    await store.enqueue(ids, "hw-r", 0, {})
    a, b = await claim_all(store, 2)
    first, second = await asyncpg.connect(db_url), await asyncpg.connect(db_url)
    complete = "SELECT aiqueue_complete($1, '{\"score\": 1}'::jsonb, NULL, $2)"
    try:
        t1, t2 = first.transaction(), second.transaction()
        await t1.start()
        await t2.start()
        await first.execute(complete, a.queue_id, a.dispatch_seq)
        racing = asyncio.create_task(second.execute(complete, b.queue_id, b.dispatch_seq))
        # The second waits for the first (its pin on b, aiqueue 0023) until it commits.
        await asyncio.sleep(0.3)
        assert not racing.done()
        await t1.commit()
        await racing
        await t2.commit()
    finally:
        await first.close()
        await second.close()
    runs = await events(conn, "marking.run_finished")
    assert len(runs) == 1 and runs[0]["completed"] == 2


async def test_a_rolled_back_change_leaves_no_event(
    store: Store, db_url: str, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 1, "hw-x")
    await store.enqueue(ids, "hw-x", 0, {})
    [job] = await claim_all(store, 1)
    other = await asyncpg.connect(db_url)
    try:
        tx = other.transaction()
        await tx.start()
        await other.execute("UPDATE ai_marking_queue SET status = 'failed', last_error = 'x' "
                            "WHERE queue_id = $1", job.queue_id)
        assert await other.fetchval("SELECT count(*) FROM ai_marking_outbox") == 2
        await tx.rollback()
    finally:
        await other.close()
    assert await events(conn) == []


async def test_no_event_carries_the_submissions_content(store: Store, conn: asyncpg.Connection):
    secret_text = f"essay-{uuid.uuid4()}"
    ids = await add_submissions(conn, 3, "hw-p", content=secret_text)
    await store.enqueue(ids, "hw-p", 0, {"rubric": secret_text})
    a, b, c = await claim_all(store, 3)
    await store.complete(Completed(a.queue_id, a.dispatch_seq, {"feedback": secret_text}, USAGE),
                         plan_of())
    await store.attempt_failed(b.queue_id, b.dispatch_seq, delay=0, retryable=False,
                               max_attempts=3, error="function_error", outcome="failed")
    await store.complete(Completed(c.queue_id, c.dispatch_seq, {"feedback": secret_text}, USAGE),
                         plan_of())
    bodies = await conn.fetch("SELECT body::text AS body FROM ai_marking_outbox")
    assert len(bodies) == 2
    assert all(secret_text not in r["body"] for r in bodies)


async def test_a_later_statement_of_the_same_transaction_that_ends_the_run_writes_it(
    store: Store, db_url: str, conn: asyncpg.Connection
):
    """The first statement remembers a live row of the run; the second ends that row."""
    ids = await add_submissions(conn, 20, "hw-t")
    await store.enqueue(ids, "hw-t", 0, {})
    [job] = await claim_all(store, 1)
    other = await asyncpg.connect(db_url)
    try:
        async with other.transaction():
            await other.execute("UPDATE ai_marking_queue SET status = 'cancelled' "
                                "WHERE status = 'pending'")
            assert await other.fetchval("SELECT count(*) FROM ai_marking_outbox") == 0
            await other.execute("UPDATE ai_marking_queue SET status = 'failed', "
                                "last_error = 'bad_request' WHERE queue_id = $1", job.queue_id)
    finally:
        await other.close()
    [run] = await events(conn, "marking.run_finished")
    assert (run["completed"], run["failed"], run["cancelled"]) == (0, 1, 19)


async def test_recovery_across_runs_writes_one_event_per_finished_run(
    store: Store, conn: asyncpg.Connection
):
    for name, n in (("hw-a", 2), ("hw-b", 3), ("hw-c", 2)):
        await store.enqueue(await add_submissions(conn, n, name), name, 0, {})
    await claim_all(store, 7)
    # hw-c keeps one row in flight; every other row is stuck.
    await conn.execute("""UPDATE ai_marking_claimed SET lease_at = now() - interval '1 hour'
                          WHERE queue_id <> (SELECT queue_id FROM ai_marking_queue
                                             WHERE assignment_id = 'hw-c' LIMIT 1)""")
    assert await store.recover_stuck(60, 1) == 6
    runs = {e["assignment_id"]: e for e in await events(conn, "marking.run_finished")}
    assert sorted(runs) == ["hw-a", "hw-b"]
    assert runs["hw-b"]["failed"] == 3
    assert len(await events(conn, "marking.row_failed")) == 6


async def test_the_outbox_takes_every_event_the_description_names(conn: asyncpg.Connection):
    # Each event type the API describes can be written: a migration's list of
    # types that misses one fails its notification at the database.
    from aiqueue.web.openapi import document

    types = sorted(document()["webhooks"])
    assert "marking.calibration_ready" in types and "marking.budget_warning" in types
    for kind in types:
        await conn.execute("INSERT INTO ai_marking_outbox (type, assignment_id, body) "
                           "VALUES ($1, 'hw-1', '{}')", kind)
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_outbox") == len(types)
