"""Migrations roll back and re-apply cleanly, one step at a time."""

from __future__ import annotations

import asyncpg
import pytest

from aiqueue.db.migrate import discover, migrate
from tests.plans import plan_of

# The tests here migrate their database down, or up over its own functions: a new copy each.
pytestmark = pytest.mark.fresh_db

OBJECTS = """
SELECT (SELECT count(*) FROM pg_proc WHERE proname LIKE 'aiqueue\\_%')
     + (SELECT count(*) FROM pg_class WHERE relname LIKE 'ai\\_%' AND relkind IN ('r', 'i'))
"""


async def test_every_migration_rolls_back_and_reapplies(db_url: str, conn: asyncpg.Connection):
    # The template is fully migrated; step down one migration at a time.
    migrated = await conn.fetchval(OBJECTS)
    versions = [m.version for m in discover()]
    for version in reversed(versions):
        assert await migrate(db_url, "down") == [version]
    assert await conn.fetchval(OBJECTS) == 0
    assert await conn.fetchval("SELECT count(*) FROM aiqueue_migrations") == 0
    assert await migrate(db_url, "up") == versions
    assert await conn.fetchval(OBJECTS) == migrated
    # The newest migration's functions are the ones in use again.
    assert await conn.fetchval("SELECT count(*) FROM pg_proc WHERE proname = 'aiqueue_settle'") == 1
    ids = await conn.fetch("INSERT INTO submissions (assignment_id) VALUES ('hw') RETURNING id")
    await conn.execute("INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id) "
                       "VALUES ($1, 'hw', gen_random_uuid())", ids[0]["id"])
    row = await conn.fetchrow("SELECT * FROM aiqueue_claim($1::jsonb)", plan_of(1, 5).json)
    assert row is not None and row["submission_id"] == ids[0]["id"]


async def test_stepping_back_and_up_again_leaves_working_functions(
    db_url: str, conn: asyncpg.Connection
):
    newest = [m.version for m in discover()][-2:]
    assert await migrate(db_url, "down", steps=2) == newest[::-1]
    assert await migrate(db_url, "up") == newest
    ids = await conn.fetch("INSERT INTO submissions (assignment_id) VALUES ('hw') RETURNING id")
    await conn.execute("INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id) "
                       "VALUES ($1, 'hw', gen_random_uuid())", ids[0]["id"])
    assert await conn.fetchrow("SELECT * FROM aiqueue_claim($1::jsonb)",
                              plan_of(1, 5).json) is not None


async def test_functions_are_reapplied_only_when_their_text_changes(
    db_url: str, conn: asyncpg.Connection
):
    async def created() -> object:
        return await conn.fetchval("SELECT max(xmin::text::bigint) FROM pg_proc "
                             "WHERE proname = 'aiqueue_claim'")

    before = await created()
    assert await migrate(db_url, "up") == []
    assert await created() == before  # unchanged text: nothing re-created
    await conn.execute("UPDATE aiqueue_meta SET value = 'stale' WHERE key = 'functions_sha256'")
    assert await migrate(db_url, "up") == []
    assert await created() != before


def test_migrations_hold_schema_only():
    # The current text of every function lives in db/sql/functions/.
    for m in discover():
        for path in (m.up, m.down):
            text = path.read_text().upper()
            assert "CREATE FUNCTION" not in text and "REPLACE FUNCTION" not in text, path.name
            assert "CREATE TRIGGER" not in text and "REPLACE TRIGGER" not in text, path.name


async def test_rolling_back_the_batch_feed_spreads_its_rows_out(
    db_url: str, conn: asyncpg.Connection
):
    since_0009 = [m.version for m in discover() if m.version >= "0009"]
    subs = await conn.fetch("INSERT INTO submissions (assignment_id) "
                            "SELECT 'hw' FROM generate_series(1, 3) RETURNING id")
    await conn.execute("INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id) "
                       "SELECT unnest($1::uuid[]), 'hw', gen_random_uuid()",
                       [r["id"] for r in subs])
    before = await conn.fetch("SELECT queue_id, submission_id, status "
                              "FROM ai_marking_event_feed ORDER BY k")
    assert len(before) == 3 and await conn.fetchval("SELECT count(*) FROM ai_marking_events") == 1
    await migrate(db_url, "down", steps=len(since_0009))
    after = await conn.fetch("SELECT queue_id, submission_id, status FROM ai_marking_events "
                             "ORDER BY id")
    assert [tuple(r) for r in after] == [tuple(r) for r in before]
    await migrate(db_url, "up")
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_event_feed") == 3
