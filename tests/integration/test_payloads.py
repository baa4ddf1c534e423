"""An enqueue's payload is stored once (migration 0014), joined at claim, pruned after its rows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import asyncpg
import pytest

from aiqueue.db.migrate import migrate
from aiqueue.db.store import Store, queries
from aiqueue.wire.rules import payload_json
from tests.conftest import add_submissions
from tests.plans import plan_of

THRESHOLD = 5
RUBRIC = {"question": "Why is the sky blue?", "rubric": "r" * 2000, "max_score": 10,
          "criteria": [{"name": "physics", "points": 6}, {"name": "clarity", "points": 4}]}


async def payload_rows(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM ai_marking_payloads"))


async def age(conn: asyncpg.Connection, interval: str) -> None:
    """Move the queue's rows and the payloads' windows of use into the past."""
    back = f"- interval '{interval}'"
    await conn.execute(f"UPDATE ai_marking_queue SET created_at = created_at {back}")
    await conn.execute(f"UPDATE ai_marking_payloads SET first_used_at = first_used_at {back}, "
                       f"last_used_at = last_used_at {back}")


async def outside_their_window(conn: asyncpg.Connection) -> int:
    """Rows created outside their payload's window of use (prune would miss them)."""
    return int(await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue q JOIN ai_marking_payloads p "
        "ON p.id = q.payload_id WHERE q.created_at NOT BETWEEN p.first_used_at "
        "AND p.last_used_at"))


async def prune(conn: asyncpg.Connection) -> int:
    """One prune run, the once-a-minute gate opened first."""
    await conn.execute("UPDATE ai_queue_control SET last_prune_at = '-infinity'")
    return int(await conn.fetchval(queries()["prune"], 60.0))


async def test_a_batch_stores_its_payload_once_and_each_claim_gets_it_whole(
    store: Store, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 20)
    await store.enqueue(ids, "hw-1", 0, payload_json(RUBRIC))
    assert await payload_rows(conn) == 1
    assert await conn.fetchval(
        "SELECT count(DISTINCT payload_id) FROM ai_marking_queue WHERE payload_id IS NOT NULL"
    ) == 1
    for _ in range(3):
        job = await store.claim(plan_of(0, THRESHOLD))
        assert job is not None and job.payload == RUBRIC


async def test_equal_payloads_share_a_row_and_an_empty_one_stores_none(
    store: Store, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 4)
    await store.enqueue(ids[:1], "hw-1", 0, {"a": 1, "b": [1, 2]})
    await store.enqueue(ids[1:2], "hw-2", 0, '{"b":[1,2],"a":1}')  # another key order
    await store.enqueue(ids[2:3], "hw-3", 0, {"a": 2})
    await store.enqueue(ids[3:], "hw-4", 0, {})
    assert await payload_rows(conn) == 2
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE payload_id IS NULL") == 1
    payloads = []
    while (job := await store.claim(plan_of(0, THRESHOLD))) is not None:
        payloads.append(job.payload)
    assert sorted(payloads, key=json.dumps) == sorted(
        [{"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 2]}, {"a": 2}, {}], key=json.dumps)


async def test_a_batch_that_inserts_nothing_stores_no_payload(
    store: Store, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 2)
    await store.enqueue(ids, "hw-1", 0, {})
    await store.enqueue(ids, "hw-1", 0, RUBRIC)  # both skipped: they have live rows
    assert await payload_rows(conn) == 0


async def test_prune_removes_payloads_no_row_names_and_keeps_the_rest(
    store: Store, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 3)
    await store.enqueue(ids[:1], "hw-old", 0, {"rubric": "pruned"})
    await store.enqueue(ids[1:2], "hw-gone", 0, {"rubric": "deleted with its submission"})
    await store.enqueue(ids[2:], "hw-live", 0, {"rubric": "still queued"})
    await age(conn, "2 hours")
    await conn.execute("UPDATE ai_marking_queue SET status = 'completed', "
                       "finished_at = now() - interval '30 days' WHERE assignment_id = 'hw-old'")
    await conn.execute("DELETE FROM submissions WHERE id = $1", ids[1])
    assert await prune(conn) == 1  # the old row goes; its payload is still named this run
    assert await payload_rows(conn) == 2
    await prune(conn)
    left = await conn.fetch("SELECT payload ->> 'rubric' AS r FROM ai_marking_payloads")
    assert [r["r"] for r in left] == ["still queued"]


async def test_prune_leaves_a_payload_used_within_the_hour(
    store: Store, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 1)
    await store.enqueue(ids, "hw-1", 0, {"rubric": "r"})
    await conn.execute("DELETE FROM ai_marking_queue")
    await prune(conn)
    assert await payload_rows(conn) == 1  # a teacher may click Mark All again
    await age(conn, "61 minutes")
    await prune(conn)
    assert await payload_rows(conn) == 0


async def test_an_enqueue_racing_prune_never_names_a_deleted_payload(
    store: Store, conn: asyncpg.Connection, db_url: str
):
    ids = await add_submissions(conn, 30)
    for k in range(10):
        # An unused, old payload equal to the one being enqueued: prune wants it gone.
        await conn.execute("DELETE FROM ai_marking_queue")
        await age(conn, "2 hours")
        pruner = await asyncpg.connect(db_url)
        try:
            await asyncio.gather(store.enqueue(ids[k * 3:k * 3 + 3], "hw-1", 0, RUBRIC),
                                 prune(pruner))
        finally:
            await pruner.close()
        dangling = await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue q WHERE q.payload_id IS NOT NULL AND NOT "
            "EXISTS (SELECT 1 FROM ai_marking_payloads p WHERE p.id = q.payload_id)")
        assert dangling == 0
        assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 3


async def test_rows_lie_in_their_payloads_window_even_when_an_older_transaction_reuses_it(
    store: Store, conn: asyncpg.Connection, db_url: str
):
    ids = await add_submissions(conn, 3)
    older = await asyncpg.connect(db_url)
    try:
        tx = older.transaction()
        await tx.start()
        await older.execute("SELECT now()")  # its now() is fixed from here on
        await store.enqueue(ids[:1], "hw-1", 0, RUBRIC)  # a later transaction, committed first
        await older.fetch(queries()["enqueue"], ids[1:2], "hw-2", 0, payload_json(RUBRIC),
                          "hw-2", False, "mark", "default", None, None, None, None, False,
                          "live")
        await tx.commit()
    finally:
        await older.close()
    await store.enqueue(ids[2:], "hw-3", 0, RUBRIC)
    assert await payload_rows(conn) == 1
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 3
    assert await outside_their_window(conn) == 0
    await age(conn, "2 hours")
    await prune(conn)
    assert await payload_rows(conn) == 1  # every row still names it


@pytest.mark.fresh_db
async def test_rolling_0014_back_copies_the_payload_into_every_row_again(
    store: Store, conn: asyncpg.Connection, db_url: str
):
    ids = await add_submissions(conn, 4)
    await store.enqueue(ids[:3], "hw-1", 0, RUBRIC)
    await store.enqueue(ids[3:], "hw-2", 0, {})
    newer = [v async for v in _versions_from(conn, "0014")]
    await migrate(db_url, "down", steps=len(newer))
    rows = await conn.fetch("SELECT assignment_id, payload FROM ai_marking_queue ORDER BY seq")
    assert [(r["assignment_id"], json.loads(r["payload"])) for r in rows] == [
        ("hw-1", RUBRIC), ("hw-1", RUBRIC), ("hw-1", RUBRIC), ("hw-2", {})]
    await migrate(db_url, "up")
    assert await payload_rows(conn) == 1
    claimed = []
    while (job := await store.claim(plan_of(0, THRESHOLD))) is not None:
        claimed.append(job.payload)
    # (Claims take turns between the two assignments.)
    assert sorted(claimed, key=json.dumps) == sorted([RUBRIC, RUBRIC, RUBRIC, {}], key=json.dumps)


async def _versions_from(conn: asyncpg.Connection, first: str) -> AsyncIterator[str]:
    for row in await conn.fetch("SELECT version FROM aiqueue_migrations WHERE version >= $1 "
                                "ORDER BY version", first):
        yield row["version"]
