"""Migrations roll back and re-apply cleanly, one step at a time."""

from __future__ import annotations

import asyncpg

from aiqueue.migrate import discover, migrate

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
    row = await conn.fetchrow("SELECT * FROM aiqueue_claim(1, 5)")
    assert row is not None and row["submission_id"] == ids[0]["id"]


async def test_rolling_back_the_hot_path_restores_the_first_claim(
    db_url: str, conn: asyncpg.Connection
):
    assert await migrate(db_url, "down") == ["0006_dispatch_ref"]
    assert await migrate(db_url, "down") == ["0005_hot_path"]
    assert await conn.fetchval(
        "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
        "WHERE p.proname = 'aiqueue_gate_open'") == "sql"
    assert await conn.fetchval("SELECT count(*) FROM pg_proc WHERE proname IN "
                               "('aiqueue_settle', 'aiqueue_gate', 'aiqueue_in_flight')") == 0
    ids = await conn.fetch("INSERT INTO submissions (assignment_id) VALUES ('hw') RETURNING id")
    await conn.execute("INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id) "
                       "VALUES ($1, 'hw', gen_random_uuid())", ids[0]["id"])
    assert await conn.fetchrow("SELECT * FROM aiqueue_claim(1, 5)") is not None
