"""The test databases used again (tests/dbpool.py) are, to a test, a fresh copy of the template.

- a database a test wrote into is put back with every row, sequence, table size and
  planner estimate a fresh copy has, under a new name, with its sessions ended;
- a database whose catalog a test changed is not used again: a fresh copy replaces it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from aiqueue.web.app import create_app
from tests import pg
from tests.catalog import catalog
from tests.conftest import AUTH, add_submissions, app_client, make_settings, mocked_function
from tests.dbpool import Pool, differences, state


@pytest.fixture
async def pool(pg_admin: str, pg_pool: Pool) -> AsyncIterator[Pool]:
    """A pool of the test's own, on the session's template."""
    own = Pool(pg_admin, pg.TEMPLATE, pg_pool.snap, pg.next_name)
    yield own
    await own.close()


async def fresh_state(pg_admin: str) -> dict[str, object]:
    dsn = await pg.create_test_db(pg_admin)
    try:
        return await _state(dsn)
    finally:
        await pg.drop_test_db(pg_admin, dsn)


async def _state(dsn: str) -> dict[str, object]:
    conn = await asyncpg.connect(dsn)
    try:
        return await state(conn)
    finally:
        await conn.close()


async def _write_everywhere(dsn: str) -> asyncpg.Connection:
    """Marking through the real app, the migrations' rows changed, every sequence
    moved on, rows rolled back and rows deleted; returns a session left open."""
    conn = await asyncpg.connect(dsn)
    ids = await add_submissions(conn, 5)
    with mocked_function():
        async with app_client(create_app(make_settings(dsn))) as client:
            r = await client.post("/api/marking/enqueue", headers=AUTH, json={
                "assignment_id": "hw-1", "submission_ids": [str(i) for i in ids]})
            assert r.status_code == 202, r.text
    await conn.execute(
        "UPDATE ai_queue_control SET paused = true, consecutive_failures = 3;"
        " INSERT INTO aiqueue_meta (key, value) VALUES ('left', 'behind');"
        " DELETE FROM aiqueue_migrations WHERE version = (SELECT min(version)"
        "   FROM aiqueue_migrations)")
    for (name,) in await conn.fetch(
            "SELECT c.oid::regclass::text FROM pg_class c WHERE c.relkind = 'S'"
            " AND c.relnamespace = 'public'::regnamespace"):
        await conn.execute(f"SELECT nextval('{name}')")
    tx = conn.transaction()
    await tx.start()
    await conn.execute("INSERT INTO ai_queue_login_failures (client) VALUES ('rolled back')")
    await tx.rollback()
    await conn.execute("INSERT INTO ai_marking_probes (probe_id, answer)"
                       " VALUES (gen_random_uuid(), 'probe')")
    await conn.execute("DELETE FROM ai_marking_probes")
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 5
    return conn


async def test_a_used_database_is_put_back_as_a_fresh_copy(pg_admin: str, pool: Pool):
    used = await pool.acquire()
    before = await _state(used)
    left_open = await _write_everywhere(used)
    assert differences(await _state(used), before), "the writes changed nothing"
    pool.release(used, "writer")
    again = await pool.acquire()
    assert (pool.tally.reused, pool.tally.dirtied) == (1, [])
    assert again != used
    with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError, OSError)):
        await left_open.fetchval("SELECT 1")  # its session was ended
    with pytest.raises(asyncpg.InvalidCatalogNameError):
        await asyncpg.connect(used)  # the old name is gone
    assert differences(await _state(again), await fresh_state(pg_admin)) == []


async def test_a_database_no_test_wrote_into_is_put_back_unchanged(pg_admin: str, pool: Pool):
    pool.release(await pool.acquire(), "reader")
    again = await pool.acquire()
    assert pool.tally.reused == 1
    assert differences(await _state(again), await fresh_state(pg_admin)) == []


CATALOG_CHANGES = [
    "ALTER TABLE submissions ADD COLUMN x int",
    "CREATE INDEX ON submissions (content)",
    "ALTER TABLE submissions ALTER COLUMN content SET STATISTICS 5",
    "CREATE TABLE extra (id int)",
    "CREATE SCHEMA extra",
    "CREATE FUNCTION aiqueue_extra() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "ALTER TABLE ai_marking_queue DISABLE TRIGGER ALL",
    "ALTER SEQUENCE ai_marking_events_id_seq INCREMENT 5",
    "GRANT SELECT ON ai_marking_queue TO PUBLIC",
    "REVOKE EXECUTE ON FUNCTION pg_catalog.now() FROM PUBLIC",
    "ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC",
    "COMMENT ON TABLE submissions IS 'mine'",
    "ALTER DATABASE {db} SET timezone TO 'Pacific/Kiritimati'",
    "ANALYZE ai_queue_control",
]


@pytest.mark.parametrize("change", CATALOG_CHANGES)
async def test_a_database_whose_catalog_changed_is_replaced(pool: Pool, change: str):
    used = await pool.acquire()
    conn = await asyncpg.connect(used)
    try:
        await conn.execute(change.format(db=await conn.fetchval("SELECT current_database()")))
    finally:
        await conn.close()
    pool.release(used, "changer")
    again = await pool.acquire()
    assert (pool.tally.reused, pool.tally.dirtied) == (0, ["changer"])
    conn = await asyncpg.connect(again)
    try:
        assert await catalog(conn, pool.snap.catalog.query) == pool.snap.catalog
    finally:
        await conn.close()
