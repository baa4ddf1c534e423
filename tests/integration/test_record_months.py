"""The record's months (aiqueue 0078, docs/operating/data-protection.md): a row's end
moves it from the live table to the month it was created in; a month of ended rows goes
whole once every row of it is past its period, with its count deltas, its traces and the
attempts' months no kept row needs; a month with a row still to keep stays, and so does
every newer one; a live row keeps the attempts of its month."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from tests.integration.partitions_kit import (
    add_month,
    counted_as_held,
    keep,
    partitions,
    record_month,
    rows_made,
    without_record_upgrade_partition,
    without_upgrade_partition,
)

# Each test makes and drops partitions: a new copy of the template each.
pytestmark = pytest.mark.fresh_db


async def test_a_month_goes_whole_with_its_counts_traces_and_attempts_once_its_rows_are_past(
    conn: asyncpg.Connection
):
    await without_record_upgrade_partition(conn)
    await without_upgrade_partition(conn)
    now = datetime.now(UTC)
    old, mid = now - timedelta(days=70), now - timedelta(days=35)
    old_part, mid_part = await record_month(conn, old), await record_month(conn, mid)
    for at in (old, mid):
        await add_month(conn, "ai_marking_attempts", at)
    gone = [*await rows_made(conn, "completed", old, old + timedelta(hours=1)),
            *await rows_made(conn, "failed", old, old + timedelta(hours=2))]
    # A failed row of the later month ended 10 days ago: within its 30 days.
    kept = await rows_made(conn, "failed", mid, now - timedelta(days=10))
    await counted_as_held(conn)

    assert await keep(conn) >= 2  # the record's month and the attempts' month
    months = await partitions(conn, "ai_marking_queue_ended")
    assert old_part not in months and mid_part in months
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue WHERE queue_id = ANY($1)",
                               gone) == 0
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_traces WHERE queue_id = ANY($1)",
                               gone) == 0
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_traces WHERE queue_id = ANY($1)",
                               kept) == 2
    attempts = await partitions(conn, "ai_marking_attempts")
    assert f"ai_marking_attempts_m{old:%Y%m}" not in attempts
    assert f"ai_marking_attempts_m{mid:%Y%m}" in attempts
    await counted_as_held(conn)
    # Nothing more to do while the later month keeps its row.
    assert await keep(conn) == 0


async def test_a_month_with_a_row_to_keep_stays_and_so_does_every_newer_one(
    conn: asyncpg.Connection
):
    await without_record_upgrade_partition(conn)
    await without_upgrade_partition(conn)
    now = datetime.now(UTC)
    old, mid = now - timedelta(days=70), now - timedelta(days=45)
    old_part, mid_part = await record_month(conn, old), await record_month(conn, mid)
    await add_month(conn, "ai_marking_attempts", old)
    # A failed row of the older month that ended 10 days ago: within its 30 days.
    recent = await rows_made(conn, "failed", old, now - timedelta(days=10), n=1)
    await rows_made(conn, "completed", mid, mid + timedelta(hours=1))
    assert await keep(conn) == 0
    months = await partitions(conn, "ai_marking_queue_ended")
    assert old_part in months and mid_part in months
    # Once it is past its period, both go; a live row from that month is in the live
    # table (a row's end moves it to its month) and keeps the month's attempts.
    waiting = await rows_made(conn, "pending", old, None, n=1)
    await conn.execute("UPDATE ai_marking_queue SET finished_at = $2 WHERE queue_id = ANY($1)",
                       recent, old + timedelta(days=1))
    assert await keep(conn) == 2
    months = await partitions(conn, "ai_marking_queue_ended")
    assert old_part not in months and mid_part not in months
    assert f"ai_marking_attempts_m{old:%Y%m}" in await partitions(conn, "ai_marking_attempts")
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue_live"
                               " WHERE queue_id = ANY($1)", waiting) == 1
    await counted_as_held(conn)
    # Its end moves it out of the live table (to the ended rows' default: no month
    # holds its time any more).
    await conn.execute("UPDATE ai_marking_queue SET status = 'cancelled', finished_at = $2"
                       " WHERE queue_id = ANY($1)", waiting, old + timedelta(days=1))
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue_live"
                               " WHERE queue_id = ANY($1)", waiting) == 0
    await counted_as_held(conn)


async def test_a_row_ended_by_hand_without_an_end_time_ends_then_and_its_month_can_go(
    conn: asyncpg.Connection
):
    await without_record_upgrade_partition(conn)
    await without_upgrade_partition(conn)
    old = datetime.now(UTC) - timedelta(days=70)
    part = await record_month(conn, old)
    by_hand = await rows_made(conn, "pending", old, None, n=1)
    ended_by_app = await rows_made(conn, "pending", old, None, n=1)
    # Host SQL ends one by its status alone, the other with its end time.
    await conn.execute("UPDATE ai_marking_queue SET status = 'completed' WHERE queue_id = ANY($1)",
                       by_hand)
    await conn.execute("UPDATE ai_marking_queue SET status = 'failed', finished_at = $2"
                       " WHERE queue_id = ANY($1)", ended_by_app, old + timedelta(days=1))
    ends = dict(await conn.fetch("SELECT queue_id, finished_at FROM ai_marking_queue"
                                 " WHERE queue_id = ANY($1)", by_hand + ended_by_app))
    assert ends[ended_by_app[0]] == old + timedelta(days=1)
    ended_at = ends[by_hand[0]]
    assert ended_at is not None and abs(ended_at - datetime.now(UTC)) < timedelta(minutes=5)
    # Within its period it keeps the month; once past it, the month goes whole.
    assert await keep(conn) == 0 and part in await partitions(conn, "ai_marking_queue_ended")
    await conn.execute("UPDATE ai_marking_queue SET finished_at = $2 WHERE queue_id = ANY($1)",
                       by_hand, old + timedelta(days=1))
    assert await keep(conn) == 1 and part not in await partitions(conn, "ai_marking_queue_ended")
    await counted_as_held(conn)
