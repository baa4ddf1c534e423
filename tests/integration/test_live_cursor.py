"""The live-events cursor against concurrent transactions that commit out of id order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from aiqueue.db.listener import ChangeListener
from aiqueue.db.store import Store
from aiqueue.models import EventBatch, EventCursor, MarkingEvent
from tests.conftest import add_submissions, enqueued


@pytest.fixture
async def other(db_url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(db_url)
    yield connection
    await connection.close()


async def drain(store: Store, cursor: EventCursor, want: int) -> list[MarkingEvent]:
    """Read until `want` events came (other sessions on the server may hold xmin back a moment)."""
    got: list[MarkingEvent] = []
    deadline = time.monotonic() + 10
    while len(got) < want and time.monotonic() < deadline:
        batch = await store.live_events_after("hw-1", cursor, 100)
        got += batch.events
        if batch.events:
            cursor = batch.events[-1].cursor
        else:
            await asyncio.sleep(0.05)
    return got


async def take(conn: asyncpg.Connection, queue_id: object) -> None:
    # A claim's status change: it writes a feed event but ends no row, so two
    # sessions can commit it in either order (a row's end also takes the claim
    # lock for the run-finished notification, which would serialise them).
    await conn.execute("UPDATE ai_marking_queue SET status = 'processing' WHERE queue_id = $1",
                       queue_id)


async def test_a_new_subscriber_starts_after_what_is_already_committed(
    store: Store, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 2)
    await store.enqueue(ids[:1], "hw-1", 0, {})
    head = await store.live_events_head()
    await store.enqueue(ids[1:], "hw-1", 0, {})
    got = await drain(store, head, 1)
    if got[-1].submission_id != ids[1]:
        got += await drain(store, got[-1].cursor, 1)
    # What committed before the head is normally behind it (only a transaction
    # of another session still open then could make it come again): never lost.
    assert got[-1].submission_id == ids[1]
    assert (await store.live_events_after("hw-1", got[-1].cursor, 100)).events == []


async def test_an_event_that_commits_after_a_newer_id_is_not_skipped(
    store: Store, conn: asyncpg.Connection, other: asyncpg.Connection
):
    ids = await add_submissions(conn, 2)
    start = await store.live_events_head()
    q1, q2 = enqueued(await store.enqueue(ids, "hw-1", 0, {})).queue_ids
    pending = await drain(store, start, 2)
    cursor = pending[-1].cursor
    tx = conn.transaction()
    await tx.start()
    await take(conn, q1)  # takes the smaller event id, commits last
    await take(other, q2)  # the larger id, committed first
    visible = await other.fetch(
        "SELECT id, queue_id FROM ai_marking_events WHERE status = 'processing'")
    assert [r["queue_id"] for r in visible] == [q2]  # what a bare id cursor would pass by
    held: EventBatch = await store.live_events_after("hw-1", cursor, 100)
    assert held.events == [] and held.held_back
    await tx.commit()
    after = await drain(store, cursor, 2)
    assert [(e.queue_id, e.status) for e in after] == [(q1, "processing"), (q2, "processing")]
    ids_in_order = [e.cursor.id for e in after]
    assert ids_in_order == sorted(ids_in_order)


async def test_an_older_transaction_with_a_newer_id_is_ordered_by_transaction(
    store: Store, conn: asyncpg.Connection, other: asyncpg.Connection
):
    ids = await add_submissions(conn, 2)
    start = await store.live_events_head()
    q1, q2 = enqueued(await store.enqueue(ids, "hw-1", 0, {})).queue_ids
    cursor = (await drain(store, start, 2))[-1].cursor
    tx = conn.transaction()
    await tx.start()
    await conn.fetchval("SELECT pg_current_xact_id()")  # the older transaction id
    await take(other, q2)  # smaller event id, newer transaction, committed
    assert (await store.live_events_after("hw-1", cursor, 100)).held_back
    await take(conn, q1)  # larger event id, older transaction
    await tx.commit()
    after = await drain(store, cursor, 2)
    assert [e.queue_id for e in after] == [q1, q2]
    assert after[0].cursor.id > after[1].cursor.id and after[0].cursor < after[1].cursor
    # And nothing comes twice from the new position.
    assert (await store.live_events_after("hw-1", after[-1].cursor, 100)).events == []


async def test_events_after_reads_the_cursor_index(conn: asyncpg.Connection, store: Store):
    await conn.execute("SET enable_seqscan = off")
    plan = await conn.fetch("EXPLAIN " + store.sql["live_events_after"], "hw-1", "1", 0, 0, 10)
    text = "\n".join(r[0] for r in plan)
    assert "ai_marking_events_cursor_idx" in text, text


def test_cursor_round_trips_and_rejects_foreign_ids():
    cursor = EventCursor(812, 4051)
    assert str(cursor) == "812-4051" and EventCursor.parse(" 812-4051 ") == cursor
    in_batch = EventCursor(812, 4051, 7)
    assert str(in_batch) == "812-4051-7" and EventCursor.parse("812-4051-7") == in_batch
    for bad in ("", "42", "a-b", "1-2-x", "1-2-3-4", "-1-2", "1-" + "9" * 30, "1-2-" + "9" * 10):
        assert EventCursor.parse(bad) is None
    assert EventCursor(1, 99) < EventCursor(2, 1)
    assert EventCursor(2, 1) < EventCursor(2, 1, 1) < EventCursor(2, 1, 2) < EventCursor(2, 2)


async def test_changes_notify_only_while_a_listener_announces_itself(
    db_url: str, store: Store, other: asyncpg.Connection
):
    heard: list[str] = []
    await other.add_listener("ai_marking", lambda *args: heard.append(args[2]))
    ids = await add_submissions(other, 2)
    # Nobody announced a listener: the event row is written, no NOTIFY is sent.
    await store.enqueue(ids[:1], "hw-1", 0, {})
    await asyncio.sleep(0.3)
    assert heard == []
    assert await other.fetchval("SELECT count(*) FROM ai_marking_events") == 1
    woken = asyncio.Event()
    listener = await ChangeListener.open(db_url, "ai_marking", woken.set, lambda: None)
    try:
        await store.enqueue(ids[1:], "hw-1", 0, {})
        await asyncio.wait_for(woken.wait(), 5)
        deadline = time.monotonic() + 5
        while not heard and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert heard == ["ai_marking"]
    finally:
        await listener.close()
    # The announcement lapses unless renewed: 3 × the renewal period.
    left = await other.fetchval(
        "SELECT extract(epoch FROM listened_until - now()) FROM ai_queue_control")
    assert 0 < left <= 3 * ChangeListener.ANNOUNCE_EVERY


async def test_an_enqueue_is_one_feed_row_read_back_as_one_event_per_row(
    store: Store, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 5)
    head = await store.live_events_head()
    outcome = enqueued(await store.enqueue(ids, "hw-1", 0, {}))
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_events") == 1
    # Read in pages of two: each page resumes inside the batch from the last cursor.
    seen: list[MarkingEvent] = []
    cursor = head
    deadline = time.monotonic() + 10
    while len(seen) < 5 and time.monotonic() < deadline:
        batch = await store.live_events_after("hw-1", cursor, 2)
        assert len(batch.events) <= 2
        seen += batch.events
        if batch.events:
            cursor = batch.events[-1].cursor
    assert sorted(e.queue_id for e in seen) == sorted(outcome.queue_ids)
    assert {e.status for e in seen} == {"pending"}
    assert [e.cursor.k for e in seen] == [1, 2, 3, 4, 5]
    assert len({e.cursor.id for e in seen}) == 1
    # A row's later change comes after the whole batch, and nothing comes twice.
    await take(conn, seen[2].queue_id)
    after = await drain(store, cursor, 1)
    assert [(e.queue_id, e.status, e.cursor.k) for e in after] == [
        (seen[2].queue_id, "processing", 0)]
    assert (await store.live_events_after("hw-1", after[-1].cursor, 100)).events == []
