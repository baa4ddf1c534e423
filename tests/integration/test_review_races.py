"""Apply, accept and revert against a real PostgreSQL: one transaction each, races included."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import asyncpg
import pytest

from aiqueue.db.store import Store
from aiqueue.models import Completed
from tests.conftest import add_submissions, enqueued
from tests.plans import plan_of

pytestmark = pytest.mark.store_pool(20)
CAP, THRESHOLD = 0, 5


async def claimed(store: Store, sub: uuid.UUID) -> tuple[uuid.UUID, int]:
    """Enqueue one submission and claim its row: (queue_id, dispatch_seq)."""
    out = enqueued(await store.enqueue([sub], "hw-r", 0, {}, remark=True))
    job = await store.claim(plan_of(CAP, THRESHOLD))
    assert job is not None and job.queue_id == out.queue_ids[0]
    return job.queue_id, job.dispatch_seq


async def applied(store: Store, sub: uuid.UUID, score: int) -> uuid.UUID:
    queue_id, seq = await claimed(store, sub)
    assert await store.complete(Completed(queue_id, seq, {"score": score}, None), plan_of())
    return queue_id


async def mark_of(conn: asyncpg.Connection, sub: uuid.UUID) -> Any:
    raw = await conn.fetchval("SELECT ai_result::text FROM submissions WHERE id = $1", sub)
    return json.loads(raw) if raw else None


async def consistent(conn: asyncpg.Connection, sub: uuid.UUID) -> None:
    """The submission's mark is what its history says: the newest result not reverted,
    else what the first result replaced."""
    rows = await conn.fetch("SELECT result::text, previous_result::text, review "
                            "FROM ai_marking_results WHERE submission_id = $1 ORDER BY seq", sub)
    live = [r for r in rows if r["review"] != "reverted"]
    if live:
        expected = json.loads(live[-1]["result"])
    else:
        expected = json.loads(rows[0]["previous_result"]) if rows[0]["previous_result"] else None
    assert await mark_of(conn, sub) == expected


async def test_apply_records_what_it_replaced_and_revert_restores_it(
    store: Store, conn: asyncpg.Connection
):
    [sub] = await add_submissions(conn, 1)
    first = await applied(store, sub, 3)
    second = await applied(store, sub, 5)
    rows = await conn.fetch("SELECT queue_id, result::text, previous_result::text, review "
                            "FROM ai_marking_results ORDER BY seq")
    assert [r["queue_id"] for r in rows] == [first, second]
    assert rows[0]["previous_result"] is None and rows[1]["previous_result"] == '{"score": 3}'
    assert (await store.revert(first, "t")).outcome == "superseded"
    assert (await store.revert(second, "t")).outcome == "reverted"
    assert await mark_of(conn, sub) == {"score": 3}
    assert (await store.revert(second, "t")).outcome == "not_completed"
    assert (await store.revert(first, "t")).outcome == "reverted"
    assert await mark_of(conn, sub) is None
    assert await conn.fetchval("SELECT ai_marked_at FROM submissions WHERE id = $1", sub) is None
    await consistent(conn, sub)


async def test_revert_then_late_result(store: Store, conn: asyncpg.Connection):
    """Order 1: the revert commits first; the next result replaces the reverted state."""
    [sub] = await add_submissions(conn, 1)
    first = await applied(store, sub, 3)
    queue_id, seq = await claimed(store, sub)  # a re-mark is out at the function
    assert (await store.revert(first, "t")).outcome == "reverted"
    assert await store.complete(Completed(queue_id, seq, {"score": 9}, None), plan_of())
    assert await mark_of(conn, sub) == {"score": 9}
    prev = await conn.fetchval("SELECT previous_result FROM ai_marking_results "
                               "WHERE queue_id = $1", queue_id)
    assert prev is None  # what the revert left, not the reverted result
    await consistent(conn, sub)


async def test_late_result_then_revert(store: Store, conn: asyncpg.Connection):
    """Order 2: the result commits first; the older revert is superseded and changes nothing."""
    [sub] = await add_submissions(conn, 1)
    first = await applied(store, sub, 3)
    queue_id, seq = await claimed(store, sub)
    assert await store.complete(Completed(queue_id, seq, {"score": 9}, None), plan_of())
    assert (await store.revert(first, "t")).outcome == "superseded"
    assert await mark_of(conn, sub) == {"score": 9}
    await consistent(conn, sub)


async def lock_waits(conn: asyncpg.Connection, n: int, *tasks: asyncio.Task[Any]) -> None:
    """Until `n` sessions of this database wait on a lock (the tasks must still be running)."""
    for _ in range(1000):
        assert not any(t.done() for t in tasks), "a task finished instead of waiting"
        waiting = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'")
        if waiting >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{n} lock waits never showed in pg_stat_activity")


@pytest.mark.parametrize(("first", "expected"), [("revert", "reverted"),
                                                 ("result", "superseded")])
async def test_concurrent_revert_and_result_serialise_on_the_submission(
    store: Store, conn: asyncpg.Connection, db_url: str, first: str, expected: str
):
    """Both wait while a third transaction holds the submission; the first to wait
    takes it first (row locks queue in order).  Either way the result is applied,
    and the submission and its history agree."""
    [sub] = await add_submissions(conn, 1)
    prior = await applied(store, sub, 3)
    queue_id, seq = await claimed(store, sub)
    blocker = await asyncpg.connect(db_url)
    try:
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("SELECT 1 FROM submissions WHERE id = $1 FOR UPDATE", sub)
        calls: dict[str, Callable[[], Coroutine[Any, Any, Any]]] = {
            "revert": lambda: store.revert(prior, "t"),
            "result": lambda: store.complete(Completed(queue_id, seq, {"score": 9}, None),
                                             plan_of())}
        tasks: dict[str, asyncio.Task[Any]] = {}
        for name in (first, *(n for n in calls if n != first)):
            tasks[name] = asyncio.create_task(calls[name]())
            await lock_waits(conn, len(tasks), *tasks.values())
        await tx.rollback()
    finally:
        await blocker.close()
    revert, done = await tasks["revert"], await tasks["result"]
    assert done  # the result is applied either way
    assert revert.outcome == expected
    assert await mark_of(conn, sub) == {"score": 9}
    await consistent(conn, sub)


async def test_concurrent_reverts_and_accepts_of_one_result(
    store: Store, conn: asyncpg.Connection
):
    [sub] = await add_submissions(conn, 1)
    first = await applied(store, sub, 3)
    calls = [store.revert(first, f"r{i}") for i in range(5)]
    calls += [store.accept(first, f"a{i}", None) for i in range(5)]
    results = await asyncio.gather(*calls)
    reverts = [r.outcome for r in results[:5]]
    assert reverts.count("reverted") == 1
    assert set(reverts) == {"reverted", "not_completed"}
    row = await conn.fetchrow("SELECT review, reverted_at FROM ai_marking_results")
    assert row["review"] == "reverted" and row["reverted_at"] is not None
    assert await mark_of(conn, sub) is None
    await consistent(conn, sub)


async def test_duplicate_deliveries_record_one_result(store: Store, conn: asyncpg.Connection):
    [sub] = await add_submissions(conn, 1)
    queue_id, seq = await claimed(store, sub)
    done = await asyncio.gather(*[store.complete(Completed(queue_id, seq, {"score": 1}, None),
                                                 plan_of())
                                  for _ in range(5)])
    assert sum(done) == 1
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_results") == 1
    assert await conn.fetchval("SELECT sum(n) FROM ai_marking_tally WHERE job = 'completed'") == 1


async def test_review_run_accepts_or_reverts_the_latest_run_only(
    store: Store, conn: asyncpg.Connection
):
    subs = await add_submissions(conn, 3, assignment_id="hw-r")
    old = await applied(store, subs[0], 1)  # an earlier run
    await store.enqueue(subs, "hw-r", 0, {}, remark=True)
    for _ in subs:
        job = await store.claim(plan_of(CAP, THRESHOLD))
        assert job is not None
        await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 2}, None),
                             plan_of())
    assert await store.review_run("hw-r", "accept", "t") == (3, 0)
    assert await store.review_run("hw-r", "accept", "t") == (0, 0)
    assert await conn.fetchval("SELECT review FROM ai_marking_results WHERE queue_id = $1",
                               old) == "unreviewed"
    # Accepted results are not "unreviewed": a run revert leaves them.
    assert await store.review_run("hw-r", "revert", "t") == (0, 0)


async def test_live_feed_carries_progress_messages_only_while_processing(
    store: Store, conn: asyncpg.Connection
):
    from aiqueue.models import EventCursor

    async def feed() -> list[dict[str, Any]]:
        for _ in range(200):  # other sessions' open transactions may hold events back
            batch = await store.live_events_after("hw-r", EventCursor(0, 0), 100)
            if not batch.held_back:
                return [e.to_json() for e in batch.events]
            await asyncio.sleep(0.05)
        raise AssertionError("events held back for 10 s")

    [sub] = await add_submissions(conn, 1)
    queue_id, seq = await claimed(store, sub)
    assert await store.heartbeat(queue_id, seq, {"current": 2, "total": 5, "message": "crit 2"})
    beats = [e for e in await feed() if "progress" in e]
    assert beats == [{"queue_id": str(queue_id), "submission_id": str(sub),
                      "status": "processing",
                      "progress": {"current": 2, "total": 5, "message": "crit 2"}}]
    # The feed table itself never stores the message (it may quote the answer).
    stored = await conn.fetchval("SELECT summary::text FROM ai_marking_events "
                                 "WHERE summary ? 'progress'")
    assert stored == '{"progress": {"total": 5, "current": 2}}'
    assert await store.complete(Completed(queue_id, seq, {"score": 1}, None), plan_of())
    replay = [e for e in await feed() if "progress" in e]
    assert replay[0]["progress"] == {"current": 2, "total": 5, "message": None}
    assert (await store.accept(queue_id, "t", None)).outcome == "accepted"
    last = (await feed())[-1]
    assert last["status"] == "completed" and last["review"] == "accepted"
