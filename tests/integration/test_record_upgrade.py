"""The record's upgrade to a live table and ended months (0078) in bounded steps: its
preparation copies the ended rows into the month it attaches and keeps the copy
while the app writes, so the upgrade's lock reads no ended row; without the copy
(or with its trigger switched off in between) the upgrade reads the old table under
its lock, and loses nothing either way (docs/performance.md, "A year of a district")."""

from __future__ import annotations

import asyncio
import json
import random
import uuid

import asyncpg
import pytest

from aiqueue.db.migrate import discover, migrate, prepare
from tests.integration.partitions_kit import heard_while_migrating
from tests.roles import prepare_like_supabase

# The test migrates its database down and up: a new copy.
pytestmark = pytest.mark.fresh_db

RECORD = "0078_record_ended"
# The record's upgrade and the migrations after it, which each test takes down and up.
LATER = [m.version for m in discover() if m.version >= RECORD]
COPY = "SELECT c.oid, c.relname, obj_description(c.oid, 'pg_class') AS note FROM pg_class c" \
       " WHERE c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'"


async def _rows(conn: asyncpg.Connection, n: int, status: str, created: str) -> list[uuid.UUID]:
    """`n` record rows in `status`, created at `created` (host SQL, the rules off)."""
    ids = []
    await conn.execute("SET session_replication_role = replica")
    for _ in range(n):
        sub = await conn.fetchval(
            "INSERT INTO submissions (assignment_id, content) VALUES ('hw', 'a') RETURNING id")
        ids.append(await conn.fetchval(
            "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status,"
            " created_at, finished_at) VALUES ($1, 'hw', gen_random_uuid(), $2,"
            " $3::text::timestamptz, CASE WHEN $2 IN ('pending', 'processing') THEN NULL"
            " ELSE $3::text::timestamptz + interval '1 minute' END) RETURNING queue_id",
            sub, status, created))
    await conn.execute("RESET session_replication_role")
    return ids


async def _record(conn: asyncpg.Connection) -> list[dict[str, object]]:
    """Every record row, whole but for the identity's seq and the by-hand move count."""
    rows = await conn.fetch("SELECT to_jsonb(q) - 'queue_moves' AS j FROM ai_marking_queue q"
                            " ORDER BY queue_id")
    return [json.loads(r["j"]) for r in rows]


async def _at_0077(db_url: str, conn: asyncpg.Connection) -> dict[str, list[uuid.UUID]]:
    assert await migrate(db_url, "down", steps=len(LATER)) == LATER[::-1]
    return {"old": await _rows(conn, 30, "completed", "2026-01-15T10:00:00+00"),
            "failed": await _rows(conn, 5, "failed", "2026-02-03T10:00:00+00"),
            "pending": await _rows(conn, 4, "pending", "2026-02-03T10:00:00+00"),
            "processing": await _rows(conn, 2, "processing", "2026-02-03T10:00:00+00")}


async def _prepare(db_url: str) -> None:
    side = await asyncpg.connect(db_url)
    try:
        assert await prepare(side, None) > 0
    finally:
        await side.close()


async def _months(conn: asyncpg.Connection) -> dict[str, int]:
    """The record's ended months and the oid of each table."""
    rows = await conn.fetch(
        "SELECT c.relname, c.oid FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'ai_marking_queue_ended'::regclass")
    return {r["relname"]: r["oid"] for r in rows}


async def test_the_prepared_copy_keeps_every_change_and_becomes_the_month(
        db_url: str, conn: asyncpg.Connection):
    ids = await _at_0077(db_url, conn)
    # Supabase's default privileges hand every new table and routine to its API roles.
    await prepare_like_supabase(conn)
    await _prepare(db_url)
    copy = await conn.fetchrow(COPY)
    assert copy["note"] == "aiqueue 0078: copied"
    ended = "status NOT IN ('pending', 'processing')"
    assert await conn.fetchval(f"SELECT count(*) FROM {copy['relname']}") == 35
    # Only its owner reaches it until the upgrade's lockdown, and runs its trigger.
    assert await conn.fetchval(
        "SELECT relrowsecurity AND coalesce(array_length(relacl, 1), 0) <= 1 FROM pg_class"
        " WHERE oid = $1", copy["oid"])
    assert await conn.fetchval(
        "SELECT prosecdef AND proacl IS NOT NULL AND array_length(proacl, 1) = 1 FROM pg_proc"
        " WHERE proname = 'aiqueue_upgrade_0078_mirror'")

    # The app and host SQL go on writing; the trigger keeps the copy.
    await conn.execute("UPDATE ai_marking_queue SET last_error = 'seen' WHERE queue_id = $1",
                       ids["failed"][0])
    await conn.execute("DELETE FROM ai_marking_queue WHERE queue_id = $1", ids["old"][0])
    await conn.execute("UPDATE ai_marking_queue SET status = 'pending', finished_at = NULL"
                       " WHERE queue_id = $1", ids["failed"][1])
    await conn.execute("UPDATE ai_marking_queue SET status = 'completed', finished_at = now()"
                       " WHERE queue_id = $1", ids["processing"][0])
    await _rows(conn, 1, "cancelled", "2026-02-04T10:00:00+00")
    copied = await conn.fetch(f"SELECT to_jsonb(c) AS j FROM {copy['relname']} c ORDER BY 1")
    kept = await conn.fetch(f"SELECT to_jsonb(q) AS j FROM ai_marking_queue q WHERE {ended}"
                            " ORDER BY 1")
    assert [json.loads(r["j"]) for r in copied] == [json.loads(r["j"]) for r in kept]
    before = await _record(conn)
    indexes = await conn.fetchval("SELECT count(*) FROM pg_index"
                                  " WHERE indrelid = 'ai_marking_queue'::regclass")

    # Under the upgrade's lock, ATTACH trusts the copy's check, and no index is built
    # on the copy (its run here is rolled back; `migrate up` follows).
    heard = await heard_while_migrating(conn, RECORD)
    assert any(f'table "{copy["relname"]}" is implied' in h for h in heard), heard
    assert not [h for h in heard if h.startswith(("verifying table", "building index"))
                and copy["relname"] in h], heard

    assert await migrate(db_url, "up") == LATER
    assert await _record(conn) == before
    # The copy is the month (ATTACH read no row: it is the table the steps made), with
    # its check gone; the old table is gone, and so are the trigger and its function.
    months = await _months(conn)
    assert months[copy["relname"]] == copy["oid"]
    assert await conn.fetchval("SELECT to_regclass('ai_marking_queue_before_0078')") is None
    # The parent's statistics, gathered once the upgrade committed (0078's after file).
    assert await conn.fetchval("SELECT count(*) FROM pg_stats WHERE inherited"
                               " AND tablename = 'ai_marking_queue'") > 0
    assert await conn.fetchval(
        "SELECT count(*) FROM pg_constraint WHERE conname LIKE '%\\_bound'"
        " AND conrelid = $1", copy["oid"]) == 0
    assert await conn.fetchval(
        "SELECT count(*) FROM pg_proc WHERE proname = 'aiqueue_upgrade_0078_mirror'") == 0
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue_live") == 4 + 2 - 1 + 1
    # The old table's indexes, each built on the copy (the one-lock path keeps them), and
    # each index of the ended months' parent one of them.
    assert await conn.fetchval("SELECT count(*) FROM pg_index WHERE indrelid = $1",
                               copy["oid"]) >= indexes
    assert await conn.fetchval(
        "SELECT count(*) FROM pg_index x JOIN pg_inherits h ON h.inhrelid = x.indexrelid"
        " WHERE x.indrelid = $1", copy["oid"]) == await conn.fetchval(
        "SELECT count(*) FROM pg_index WHERE indrelid = 'ai_marking_queue_ended'::regclass")
    assert await migrate(db_url, "down", steps=len(LATER)) == LATER[::-1]
    assert await _record(conn) == before


async def test_a_copy_whose_trigger_was_switched_off_is_not_used(
        db_url: str, conn: asyncpg.Connection):
    ids = await _at_0077(db_url, conn)
    await _prepare(db_url)
    old = await conn.fetchval("SELECT 'ai_marking_queue'::regclass::oid")
    # A bulk change with the user triggers off: the copy misses it.
    await conn.execute("ALTER TABLE ai_marking_queue DISABLE TRIGGER USER")
    await conn.execute("DELETE FROM ai_marking_queue WHERE queue_id = $1", ids["old"][0])
    await conn.execute("ALTER TABLE ai_marking_queue ENABLE TRIGGER USER")
    before = await _record(conn)
    assert await migrate(db_url, "up") == LATER
    assert await _record(conn) == before
    months = await _months(conn)
    # The one-lock path: the old table is the month; the copy went.
    assert old in months.values()
    assert len(await conn.fetch(COPY)) == 1


async def test_a_row_deleted_while_its_range_was_copied_goes_and_a_stale_copy_is_made_again(
        db_url: str, conn: asyncpg.Connection):
    await _at_0077(db_url, conn)
    steps = next(m for m in discover() if m.version == RECORD).steps

    async def run(step: str) -> None:
        for row in await conn.fetch(step):
            await conn.execute(row["statement"])

    for step in steps[:4]:  # to the copy's ranges
        await run(step)
    copy = (await conn.fetchrow(COPY))["relname"]
    # A row the copy read before its delete committed: still in the copy.
    gone = await conn.fetchval("SELECT queue_id FROM ai_marking_queue WHERE status = 'completed'"
                               " LIMIT 1")
    await conn.execute("SET session_replication_role = replica")
    await conn.execute("ALTER TABLE ai_marking_queue DISABLE TRIGGER aiqueue_upgrade_0078_mirror")
    await conn.execute("DELETE FROM ai_marking_queue WHERE queue_id = $1", gone)
    await conn.execute("ALTER TABLE ai_marking_queue ENABLE ALWAYS TRIGGER"
                       " aiqueue_upgrade_0078_mirror")
    await conn.execute("RESET session_replication_role")
    assert await conn.fetchval(f"SELECT count(*) FROM {copy} WHERE queue_id = $1", gone) == 1
    for step in steps[4:]:
        await run(step)
    assert await conn.fetchval(f"SELECT count(*) FROM {copy} WHERE queue_id = $1", gone) == 0

    # A copy whose bound has come (a preparation that waited a month) is made again.
    await conn.execute(f"ALTER TABLE {copy} RENAME TO ai_marking_queue_ended_upto_202001")
    await _prepare(db_url)
    assert [r["relname"] for r in await conn.fetch(COPY)] == [copy]
    assert await conn.fetchval(f"SELECT count(*) FROM {copy}") == 34


async def test_the_copy_matches_the_record_after_writes_during_its_steps(
        db_url: str, conn: asyncpg.Connection):
    await _at_0077(db_url, conn)
    await conn.execute("SET session_replication_role = replica")
    await conn.execute(
        "WITH s AS (INSERT INTO submissions (assignment_id, content)"
        " SELECT 'hw', 'a' FROM generate_series(1, 3000) RETURNING id)"
        " INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status,"
        " created_at, finished_at) SELECT id, 'hw', gen_random_uuid(),"
        " (ARRAY['completed', 'failed', 'pending'])[1 + (random() * 2)::int],"
        " now() - interval '20 days', now() - interval '19 days' FROM s")
    await conn.execute("UPDATE ai_marking_queue SET finished_at = NULL WHERE status = 'pending'")
    await conn.execute("RESET session_replication_role")
    stop = asyncio.Event()
    done = 0

    async def write() -> None:
        # Host SQL and the app's moves on ended rows while the steps run: an edit, an
        # erasure, a retry, an end, a new ended row.
        nonlocal done
        side = await asyncpg.connect(db_url)
        try:
            while not stop.is_set() or done < 50:
                qid = await side.fetchval("SELECT queue_id FROM ai_marking_queue"
                                          " TABLESAMPLE SYSTEM (5) LIMIT 1")
                await side.execute(random.choice([
                    "UPDATE ai_marking_queue SET last_error = 'edited' WHERE queue_id = $1",
                    "DELETE FROM ai_marking_queue WHERE queue_id = $1",
                    "UPDATE ai_marking_queue SET status = 'pending', finished_at = NULL"
                    " WHERE queue_id = $1 AND status <> 'pending'",
                    "UPDATE ai_marking_queue SET status = 'completed', finished_at = now()"
                    " WHERE queue_id = $1 AND status = 'pending'"]), qid)
                done += 1
        finally:
            await side.close()

    writer = asyncio.create_task(write())
    await _prepare(db_url)
    stop.set()
    await writer
    copy = (await conn.fetchrow(COPY))["relname"]
    copied = await conn.fetch(f"SELECT to_jsonb(c) AS j FROM {copy} c ORDER BY 1")
    kept = await conn.fetch("SELECT to_jsonb(q) AS j FROM ai_marking_queue q"
                            " WHERE status NOT IN ('pending', 'processing') ORDER BY 1")
    assert [json.loads(r["j"]) for r in copied] == [json.loads(r["j"]) for r in kept]
    before = await _record(conn)
    assert await migrate(db_url, "up") == LATER
    assert await _record(conn) == before
    # A TRUNCATE of the record empties the copy too.
    await conn.execute("TRUNCATE ai_marking_queue CASCADE")
    assert await conn.fetchval(f"SELECT count(*) FROM {copy}") == 0
