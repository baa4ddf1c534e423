"""Month partitions of attempts, results and events (docs/operating/data-protection.md).

Whole months past their period are dropped, the boundary month is pruned row by
row, the coming months are made ahead, a row no month holds lands in the default
and moves into its month later, and an erasure and the export reach every month.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from aiqueue.db.store import Store
from tests.integration.partitions_kit import (
    DAY,
    ENDED,
    HISTORY,
    PARENTS,
    add_month,
    ended_rows,
    month_start,
    partitions,
    place,
    where,
    without_upgrade_partition,
)
from tests.roles import RuntimeDb

# Each test makes and drops partitions: a new copy of the template each.
pytestmark = pytest.mark.fresh_db


async def test_a_month_past_its_period_is_dropped_whole_and_the_boundary_month_row_by_row(
    store: Store, conn: asyncpg.Connection
):
    await without_upgrade_partition(conn)
    now = datetime.now(UTC)
    cutoff = now - timedelta(seconds=HISTORY)
    boundary_start = month_start(cutoff)
    whole = boundary_start - timedelta(days=15)  # a month wholly before the cutoff
    boundary = boundary_start + (cutoff - boundary_start) / 2  # past, but its month is not
    kept_at = cutoff + timedelta(days=1)
    old, edge, young = (await ended_rows(store, conn, 2, "completed"),
                        await ended_rows(store, conn, 2, "completed"),
                        await ended_rows(store, conn, 2, "completed"))
    for qids, at in ((old, whole), (edge, boundary), (young, kept_at)):
        await place(conn, qids, at)
    # No month holds them yet: the default does, and each insert went in.
    assert await where(conn, "ai_marking_attempts", old + edge + young) == {
        "ai_marking_attempts_default"}
    for parent in ("ai_marking_attempts", "ai_marking_results"):
        for at in (whole, boundary, kept_at):
            await add_month(conn, parent, at)
    # Each month took its rows out of the default.
    assert await where(conn, "ai_marking_results", old) == {
        f"ai_marking_results_m{whole:%Y%m}"}
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_attempts_default") == 0

    done = await store.retain(ENDED, HISTORY, batch=100, every_seconds=0)
    attempts = await partitions(conn, "ai_marking_attempts")
    results = await partitions(conn, "ai_marking_results")
    # The whole month went as a partition: no row of it was deleted one by one.
    assert f"ai_marking_attempts_m{whole:%Y%m}" not in attempts
    assert f"ai_marking_results_m{whole:%Y%m}" not in results
    assert await where(conn, "ai_marking_attempts", old) == set()
    # The boundary month stays; its rows past the period went row by row.
    assert f"ai_marking_attempts_m{boundary:%Y%m}" in attempts
    assert done.results == 2 and done.attempts == 2
    assert await where(conn, "ai_marking_results", edge) == set()
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_results "
                               "WHERE queue_id = ANY($1)", young) == 2
    # This month's and next month's partitions were made ahead.
    for parent in PARENTS:
        names = await partitions(conn, parent)
        for at in (now, month_start(now) + timedelta(days=40)):
            assert f"{parent}_m{at:%Y%m}" in names


async def test_a_row_written_past_every_month_lands_in_the_default_then_in_its_month(
    store: Store, conn: asyncpg.Connection
):
    qids = await ended_rows(store, conn, 3, "completed")
    later = month_start(datetime.now(UTC)) + timedelta(days=100)
    await place(conn, qids, later)
    assert await where(conn, "ai_marking_attempts", qids) == {"ai_marking_attempts_default"}
    created = await conn.fetchval("SELECT created FROM aiqueue_keep_partitions($1, 0, 86400, 4)",
                                  HISTORY)
    assert created >= 3
    assert await where(conn, "ai_marking_attempts", qids) == {
        f"ai_marking_attempts_m{later:%Y%m}"}
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_results "
                               "WHERE queue_id = ANY($1)", qids) == 3
    # A second pass finds nothing to do.
    again = await conn.fetchrow("SELECT * FROM aiqueue_keep_partitions($1, 0, 86400, 4)", HISTORY)
    assert tuple(again) == (0, 0)


async def test_an_erasure_reaches_every_month(store: Store, conn: asyncpg.Connection):
    await without_upgrade_partition(conn)
    now = datetime.now(UTC)
    months = [now - timedelta(days=70), now - timedelta(days=35), now]
    for parent in ("ai_marking_attempts", "ai_marking_results"):
        for at in months:
            await add_month(conn, parent, at)
    qids = await ended_rows(store, conn, 1, "completed")
    sub = await conn.fetchval("SELECT submission_id FROM ai_marking_queue WHERE queue_id = $1",
                              qids[0])
    # The submission's history in every month and in the default (a time no month holds).
    for at in [*months, now + timedelta(days=200)]:
        await conn.execute("INSERT INTO ai_marking_attempts (queue_id, started_at) "
                           "VALUES ($1, $2)", qids[0], at)
        await conn.execute("INSERT INTO ai_marking_results (queue_id, submission_id, "
                           "assignment_id, run_id, applied_at, result) VALUES "
                           "(gen_random_uuid(), $1, 'hw', gen_random_uuid(), $2, '{}')", sub, at)
    placed = await conn.fetch("SELECT DISTINCT tableoid::regclass::text AS part "
                              "FROM ai_marking_results WHERE submission_id = $1", sub)
    assert len(placed) == 4  # three months and the default
    erased = await store.erase([sub], "api")
    # Five of each: the row's own attempt and result, and one in each place.
    assert erased["ai_marking_results"] == 5 and erased["ai_marking_attempts"] == 5
    assert await where(conn, "ai_marking_attempts", qids) == set()
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_results WHERE submission_id = $1",
                               sub) == 0


async def test_the_export_reads_every_month(store: Store, conn: asyncpg.Connection):
    await without_upgrade_partition(conn)
    now = datetime.now(UTC)
    spread = [now - timedelta(days=d) for d in (65, 33, 1)]
    for parent in ("ai_marking_attempts", "ai_marking_results"):
        for at in spread:
            await add_month(conn, parent, at)
    qids = await ended_rows(store, conn, 3, "completed")
    for qid, at in zip(qids, spread, strict=True):
        await place(conn, [qid], at)
    attempts = await store.export_attempts(now - timedelta(days=100), now, 0, 100)
    results = await store.export_results(now - timedelta(days=100), now, 0, 100, False)
    assert {line.fields["queue_id"] for line in attempts} >= {str(q) for q in qids}
    assert len(results) == 3
    # Paging by id walks the months in order.
    first = await store.export_attempts(now - timedelta(days=100), now, 0, 1)
    rest = await store.export_attempts(now - timedelta(days=100), now,
                                       first[0].key, 100)
    assert len(first) + len(rest) == len(attempts)


async def test_the_events_feed_keeps_a_day_and_drops_older_months(conn: asyncpg.Connection):
    await without_upgrade_partition(conn)
    now = datetime.now(UTC)
    old = month_start(now) - timedelta(days=20)
    assert await add_month(conn, "ai_marking_events", old)
    await conn.execute("INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, "
                       "status, created_at) VALUES ('hw', gen_random_uuid(), gen_random_uuid(), "
                       "'pending', $1)", old)
    await conn.fetchrow("SELECT * FROM aiqueue_keep_partitions($1, 0, $2)", HISTORY, DAY)
    assert f"ai_marking_events_m{old:%Y%m}" not in await partitions(conn, "ai_marking_events")
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_events") == 0


async def test_the_doctor_warns_when_next_month_is_missing(store: Store, conn: asyncpg.Connection):
    from aiqueue.doctor.storage import months_finding, record_finding

    assert months_finding(await store.months_ahead())[0] == "pass"
    nxt = month_start(month_start(datetime.now(UTC)) + timedelta(days=40))
    await conn.execute(f"ALTER TABLE ai_marking_results DETACH PARTITION "
                       f"ai_marking_results_m{nxt:%Y%m}")
    status, detail, _ = months_finding(await store.months_ahead())
    assert status == "warn" and "ai_marking_results" in detail
    assert "ai_marking_attempts" not in detail
    # The housekeeping makes it again (a new partition: the detached table is in the way).
    await conn.execute(f"DROP TABLE ai_marking_results_m{nxt:%Y%m}")
    await store.keep_partitions(HISTORY, every_seconds=0)
    assert months_finding(await store.months_ahead())[0] == "pass"
    health = await store.table_health()
    # The record and the state tables that exist (ai_marking_claimed).
    assert "ai_marking_queue" in [t.table for t in health]
    assert {t.table for t in health} <= {"ai_marking_queue", "ai_marking_ready",
                                         "ai_marking_claimed"}
    assert record_finding(health)[0] in ("pass", "skip")


async def test_a_new_month_is_locked_like_every_queue_table(runtime_db: RuntimeDb):
    """The runtime role makes the month (the function runs with its owner's rights), and
    the month gets row-level security, the runtime role's policy and nobody else's grant."""
    conn = await asyncpg.connect(runtime_db.runtime_dsn)
    owner = await asyncpg.connect(runtime_db.owner_dsn)
    try:
        later = month_start(datetime.now(UTC)) + timedelta(days=70)
        created = await conn.fetchval(
            "SELECT created FROM aiqueue_keep_partitions($1, 0, 86400, 2)", HISTORY)
        assert created == 4  # attempts, results, events and the record (aiqueue 0078)
        name = f"ai_marking_attempts_m{later:%Y%m}"
        row = await owner.fetchrow("SELECT relrowsecurity, relowner::regrole::text AS owner "
                                   "FROM pg_class WHERE relname = $1", name)
        assert row["relrowsecurity"]
        assert await owner.fetchval("SELECT count(*) FROM pg_policy WHERE polrelid = $1::regclass",
                                    name) == 1
        role = await conn.fetchval("SELECT current_user")
        assert role != row["owner"]
        assert await owner.fetchval("SELECT has_table_privilege($1, $2, 'INSERT')", role, name)
        # The doctor's lockdown check finds nothing out of place.
        assert await owner.fetchval("SELECT count(*) FROM pg_class c WHERE c.relname LIKE "
                                    "'ai\\_marking\\_%' AND c.relkind IN ('r', 'p') "
                                    "AND NOT c.relrowsecurity") == 0
    finally:
        await conn.close()
        await owner.close()
