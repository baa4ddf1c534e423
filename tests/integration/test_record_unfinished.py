"""The record's ended rows with no end time (aiqueue 0079, docs/operating/data-protection.md,
"Retention by the month"): a row written there without one gets one; a month holding one
from before is kept, and the month's drop asks that of an index, not of every row of the
month; every month has that index, a month the housekeeping makes later too, and the
upgrade builds it on each month beforehand and attaches it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from aiqueue.db.migrate import discover, migrate, prepare
from tests.integration.partitions_kit import (
    COMPLETED,
    ENDED,
    keep,
    partitions,
    record_month,
    rows_made,
    without_record_upgrade_partition,
    without_upgrade_partition,
)

# Each test makes and drops partitions or migrates: a new copy of the template each.
pytestmark = pytest.mark.fresh_db

INDEX = "ai_marking_queue_ended_unfinished_idx"


async def month_indexes(conn: asyncpg.Connection) -> dict[str, tuple[int, str, bool, bool]]:
    """Each month of the ended rows (a plain table): its index of the rows with no end
    time, as (oid, name, valid, attached to the parent's)."""
    rows = await conn.fetch(
        "SELECT c.relname AS part, i.oid::int AS ix, i.relname AS name, x.indisvalid AS valid,"
        "       EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = i.oid"
        "               AND h.inhparent = to_regclass($1)) AS attached"
        " FROM pg_inherits m JOIN pg_class c ON c.oid = m.inhrelid"
        " LEFT JOIN pg_index x ON x.indrelid = c.oid"
        "      AND pg_get_expr(x.indpred, x.indrelid) LIKE '%finished_at IS NULL%'"
        " LEFT JOIN pg_class i ON i.oid = x.indexrelid"
        " WHERE m.inhparent = 'ai_marking_queue_ended'::regclass", INDEX)
    return {r["part"]: (r["ix"], r["name"], r["valid"], r["attached"]) for r in rows}


def named(part: str) -> str:
    """A month's index name: the parent's with the month (97_partitions.sql), or, for the
    rows from before the upgrade, that part's own (0078)."""
    if "_upto_" in part:
        return f"{part}_unfinished_idx"
    return INDEX + part.removeprefix("ai_marking_queue_ended")


async def test_a_month_holding_a_row_with_no_end_time_stays_and_is_told_by_an_index(
    conn: asyncpg.Connection
):
    await without_record_upgrade_partition(conn)
    await without_upgrade_partition(conn)
    old = datetime.now(UTC) - timedelta(days=70)
    part = await record_month(conn, old)
    await rows_made(conn, "completed", old, old + timedelta(hours=1))
    # A row ended with no end time (by an earlier version, or host SQL): its period
    # cannot be told, so its month stays.
    untimed = await rows_made(conn, "failed", old, old + timedelta(hours=2), n=1)
    await conn.execute("UPDATE ai_marking_queue SET finished_at = NULL WHERE queue_id = ANY($1)",
                       untimed)
    assert await keep(conn) == 0 and part in await partitions(conn, "ai_marking_queue_ended")
    # Each of the three questions is an index probe: none reads the month (with
    # sequential scans priced out, a question no index answers still reads it).
    async with conn.transaction():
        await conn.execute("SET LOCAL enable_seqscan = off")
        scans = "SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = $1::regclass"
        before = await conn.fetchval(scans, part)
        assert await conn.fetchval("SELECT aiqueue_record_month_kept($1::regclass, $2, $3)",
                                   part, COMPLETED, ENDED)
        assert await conn.fetchval(scans, part) == before
    # Given its end time, it goes with its month.
    await conn.execute("UPDATE ai_marking_queue SET finished_at = $2 WHERE queue_id = ANY($1)",
                       untimed, old + timedelta(days=1))
    assert await keep(conn) == 1 and part not in await partitions(conn, "ai_marking_queue_ended")


async def test_a_row_host_sql_writes_ended_without_an_end_time_gets_one_then(
    conn: asyncpg.Connection
):
    """Written straight into the ended rows (an import, a fix-up), as a row ended by hand:
    retention goes by a row's end, so it gets one, and its month goes once that is past."""
    await without_record_upgrade_partition(conn)
    await without_upgrade_partition(conn)
    old = datetime.now(UTC) - timedelta(days=70)
    part = await record_month(conn, old)
    written = await rows_made(conn, "cancelled", old, None, n=2)
    ends = [r[0] for r in await conn.fetch(
        "SELECT finished_at FROM ai_marking_queue WHERE queue_id = ANY($1)", written)]
    assert len(ends) == 2 and all(
        e is not None and abs(e - datetime.now(UTC)) < timedelta(minutes=5) for e in ends)
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue_ended"
                               " WHERE finished_at IS NULL") == 0
    # Within its period it keeps the month; once past it, the month goes whole.
    assert await keep(conn) == 0 and part in await partitions(conn, "ai_marking_queue_ended")
    await conn.execute("UPDATE ai_marking_queue SET finished_at = $2 WHERE queue_id = ANY($1)",
                       written, old + timedelta(days=1))
    assert await keep(conn) == 1 and part not in await partitions(conn, "ai_marking_queue_ended")


async def test_every_month_has_the_index_a_month_made_later_too(conn: asyncpg.Connection):
    later = await record_month(conn, datetime.now(UTC) + timedelta(days=400))
    indexes = await month_indexes(conn)
    assert later in indexes
    assert {p: ix[1:] for p, ix in indexes.items()} == {
        p: (named(p), True, True) for p in indexes}


async def test_the_upgrade_builds_it_on_each_month_beforehand_and_attaches_it(
    db_url: str, conn: asyncpg.Connection
):
    since = [m.version for m in discover() if m.version >= "0079"]
    assert await migrate(db_url, "down", steps=len(since)) == since[::-1]
    # A month of ended rows besides the upgrade's (0078): the rows from before it, the
    # month after and the default.
    later = datetime.now(UTC) + timedelta(days=400)
    await record_month(conn, later)
    await rows_made(conn, "completed", later, later + timedelta(hours=1))
    assert {ix[0] for ix in (await month_indexes(conn)).values()} == {None}

    # The steps, each committed on its own: one index per month, built concurrently.
    assert await prepare(conn, None) >= 2
    built = await month_indexes(conn)
    assert {p: ix[1:] for p, ix in built.items()} == {p: (named(p), True, False) for p in built}
    # The migration attaches those very indexes (the same ones: none built again).
    assert await migrate(db_url, "up") == since
    assert await month_indexes(conn) == {p: (*ix[:3], True) for p, ix in built.items()}

    assert await migrate(db_url, "down", steps=len(since)) == since[::-1]
    assert {ix[0] for ix in (await month_indexes(conn)).values()} == {None}
    assert await migrate(db_url, "up") == since
    again = await month_indexes(conn)
    assert {p: ix[1:] for p, ix in again.items()} == {p: (named(p), True, True) for p in again}
