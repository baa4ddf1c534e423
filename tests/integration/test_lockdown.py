"""/ on a database prepared as Supabase prepares one: after `migrate up`, anon,
authenticated and service_role read, write and execute nothing of the queue (nor of a
`submissions` table the migration made), and the host's own `ai_*` objects are untouched.

The queue's relations and routines are listed from the catalog (the same rule
the lockdown uses: `ai_marking_`/`ai_queue_`/`aiqueue_` names in the migrations'
schema, and `submissions` when migration 0001 made it), and every refusal is a
real statement run after SET ROLE (as a superuser), not a catalog lookup alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from aiqueue.db.migrate import migrate
from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Exposure
from tests.integration.lockdown_kit import (
    HOST_AI_OBJECTS,
    HOST_NOW,
    QUEUE_RELATIONS,
    QUEUE_ROUTINES,
    probe,
)
from tests.plans import plan_of
from tests.roles import SUPABASE_ROLES, RuntimeDb, runtime_database


@pytest.fixture
async def supabase(pg_admin: str) -> AsyncIterator[RuntimeDb]:
    """A database with Supabase's roles and default privileges, then `migrate up`."""
    async with runtime_database(pg_admin, supabase=True) as db:
        yield db


@pytest.fixture
async def owner(supabase: RuntimeDb) -> AsyncIterator[asyncpg.Connection]:
    """The role that ran `migrate up` (no superuser, as Supabase's `postgres`)."""
    conn = await asyncpg.connect(supabase.owner_dsn)
    yield conn
    await conn.close()


@pytest.fixture
async def su(supabase: RuntimeDb) -> AsyncIterator[asyncpg.Connection]:
    """A superuser on the same database: it may SET ROLE to anyone (the probes)."""
    conn = await asyncpg.connect(supabase.admin_dsn)
    yield conn
    await conn.close()


async def exposures(dsn: str) -> list[Exposure]:
    store = Store(await connect_pool(dsn, max_size=1))
    try:
        return await store.queue_exposures()
    finally:
        await store.close()


async def test_the_catalog_lists_the_whole_queue(owner: asyncpg.Connection) -> None:
    relations = {r["name"] for r in await owner.fetch(QUEUE_RELATIONS)}
    routines = [r["signature"] for r in await owner.fetch(QUEUE_ROUTINES)]
    assert {"ai_marking_queue", "ai_marking_results", "ai_marking_attempts",
            "ai_marking_events", "ai_marking_event_feed", "ai_queue_control",
            "ai_queue_login_failures", "aiqueue_meta", "aiqueue_migrations",
            "ai_marking_queue_seq_seq", "submissions"} <= relations
    assert len(routines) >= 19 and "aiqueue_buckets()" in routines


async def test_supabase_roles_read_write_and_execute_nothing(
    supabase: RuntimeDb, owner: asyncpg.Connection, su: asyncpg.Connection
) -> None:
    # Rows worth stealing: a result with its feedback, an attempt, an event.
    sub = await owner.fetchval("INSERT INTO submissions (assignment_id, content)"
                               " VALUES ('hw', 'essay') RETURNING id")
    await owner.execute("INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id)"
                        " VALUES ($1, 'hw', gen_random_uuid())", sub)
    await owner.fetchrow("SELECT * FROM aiqueue_claim($1::jsonb)", plan_of(1, 5).json)
    for role in (*SUPABASE_ROLES, "authenticator"):
        found = await probe(su, role)
        assert found.allowed == [], f"{role} may: {found.allowed}"
    assert await exposures(supabase.owner_dsn) == []


async def test_a_submissions_table_the_migration_made_is_locked_like_the_queue(
    supabase: RuntimeDb, owner: asyncpg.Connection, su: asyncpg.Connection
) -> None:
    # Supabase's default privileges gave anon ALL on it when 0001 created it.
    await owner.execute("INSERT INTO submissions (assignment_id, content)"
                        " VALUES ('hw', 'a student essay')")
    for role in SUPABASE_ROLES:
        allowed = [s for s in (await probe(su, role)).allowed if "submissions" in s]
        assert allowed == [], f"{role} may: {allowed}"
    assert await su.fetchval("SELECT relrowsecurity FROM pg_class"
                             " WHERE oid = 'submissions'::regclass")
    runtime = await asyncpg.connect(supabase.runtime_dsn)
    try:  # the runtime role reads and marks, and no more
        assert await runtime.fetchval("SELECT content FROM submissions") == "a student essay"
        assert await runtime.execute("UPDATE submissions SET ai_result = '{}'") == "UPDATE 1"
        for statement in ("UPDATE submissions SET content = 'x'", "DELETE FROM submissions",
                          "INSERT INTO submissions (assignment_id) VALUES ('hw')"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await runtime.execute(statement)
    finally:
        await runtime.close()
    # A grant by mistake shows, and the next `up` takes it back.
    await owner.execute("GRANT SELECT ON submissions TO anon")
    assert Exposure("anon", "submissions", "table", "SELECT") in await exposures(
        supabase.owner_dsn)
    await migrate(supabase.owner_dsn, "up")
    assert await exposures(supabase.owner_dsn) == []


async def test_a_mistaken_grant_shows_as_an_exposure_reads_no_row_and_goes_next_migrate(
    supabase: RuntimeDb, owner: asyncpg.Connection, su: asyncpg.Connection
) -> None:
    sub = await owner.fetchval("INSERT INTO submissions (assignment_id) VALUES ('hw') RETURNING id")
    await owner.execute("INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id)"
                        " VALUES ($1, 'hw', gen_random_uuid())", sub)
    await owner.execute("GRANT SELECT ON ai_marking_queue TO anon")
    await owner.execute("GRANT EXECUTE ON FUNCTION aiqueue_buckets() TO PUBLIC")
    found = await probe(su, "anon")
    # The probe can fail: the grant lets the statement through...
    assert "SELECT * FROM ai_marking_queue LIMIT 1" in found.allowed
    assert any("aiqueue_buckets" in s for s in found.allowed)
    # ...but row-level security (no policy for anon) is the second wall.
    async with su.transaction():
        await su.execute("SET LOCAL ROLE anon")
        assert await su.fetchval("SELECT count(*) FROM ai_marking_queue") == 0
    listed = await exposures(supabase.owner_dsn)
    assert Exposure("anon", "ai_marking_queue", "table", "SELECT") in listed
    assert Exposure("PUBLIC", "aiqueue_buckets()", "function", "EXECUTE") in listed
    assert await migrate(supabase.owner_dsn, "up") == []
    for role in SUPABASE_ROLES:
        assert (await probe(su, role)).allowed == []
    assert await exposures(supabase.owner_dsn) == []


async def test_a_new_queue_table_view_and_function_are_locked_on_the_next_migrate(
    supabase: RuntimeDb, owner: asyncpg.Connection, su: asyncpg.Connection
) -> None:
    # Default privileges hand the new objects to anon & co, as they would a migration's.
    await owner.execute("CREATE TABLE ai_marking_extra (id int PRIMARY KEY, note text)")
    await owner.execute("INSERT INTO ai_marking_extra VALUES (1, 'secret')")
    await owner.execute("CREATE VIEW ai_marking_extra_view AS SELECT * FROM ai_marking_extra")
    await owner.execute("CREATE FUNCTION aiqueue_extra() RETURNS int LANGUAGE sql"
                        " SECURITY DEFINER AS 'SELECT 1'")
    before = await probe(su, "anon")
    assert "SELECT * FROM ai_marking_extra LIMIT 1" in before.allowed
    assert "SELECT aiqueue_extra()" in before.allowed
    listed = await exposures(supabase.owner_dsn)
    assert Exposure("*", "ai_marking_extra", "table", "ROW LEVEL SECURITY OFF") in listed
    assert Exposure("*", "ai_marking_extra_view", "view", "RUNS WITH OWNER RIGHTS") in listed
    assert Exposure("*", "aiqueue_extra()", "function", "SEARCH_PATH NOT PINNED") in listed

    assert await migrate(supabase.owner_dsn, "up") == []
    for role in SUPABASE_ROLES:
        assert (await probe(su, role)).allowed == [], role
    assert await owner.fetchval("SELECT relrowsecurity FROM pg_class"
                                " WHERE relname = 'ai_marking_extra'")
    config = await owner.fetchval("SELECT proconfig FROM pg_proc WHERE proname = 'aiqueue_extra'")
    assert config == ["search_path=pg_catalog, public, pg_temp"]
    # The runtime role got the new table like the others.
    runtime = await asyncpg.connect(supabase.runtime_dsn)
    try:
        assert await runtime.fetchval("SELECT note FROM ai_marking_extra") == "secret"
        assert await runtime.fetchval("SELECT count(*) FROM ai_marking_extra_view") == 1
    finally:
        await runtime.close()
    assert await exposures(supabase.owner_dsn) == []


HOST_SUBMISSIONS = """
CREATE TABLE submissions (id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
                          assignment_id text NOT NULL, content text NOT NULL DEFAULT '');
REVOKE ALL ON submissions FROM anon;
GRANT SELECT ON submissions TO authenticated;
"""


async def test_the_hosts_submissions_keep_the_privileges_their_owner_gave(
    pg_admin: str
) -> None:
    async with runtime_database(pg_admin, supabase=True, host_sql=HOST_SUBMISSIONS) as db:
        owner = await asyncpg.connect(db.owner_dsn)
        try:
            acl = await owner.fetchval("SELECT relacl::text FROM pg_class"
                                       " WHERE relname = 'submissions'")
            await migrate(db.owner_dsn, "up")
            assert await owner.fetchval("SELECT relacl::text FROM pg_class"
                                        " WHERE relname = 'submissions'") == acl
            assert await owner.fetchval(
                "SELECT has_table_privilege('authenticated', 'submissions', 'SELECT')")
            assert not await owner.fetchval("SELECT relrowsecurity FROM pg_class"
                                            " WHERE relname = 'submissions'")
            assert await exposures(db.owner_dsn) == []
        finally:
            await owner.close()


async def test_the_hosts_own_ai_objects_keep_every_privilege_and_setting(pg_admin: str) -> None:
    async with runtime_database(pg_admin, supabase=True, host_sql=HOST_AI_OBJECTS) as db:
        owner = await asyncpg.connect(db.owner_dsn)
        try:
            before = [tuple(r) for r in await owner.fetch(
                "SELECT * FROM host_before ORDER BY 1")]
            assert len(before) == 5
            assert [tuple(r) for r in await owner.fetch(HOST_NOW)] == before
            await migrate(db.owner_dsn, "up")
            assert [tuple(r) for r in await owner.fetch(HOST_NOW)] == before
            assert not await owner.fetchval(
                "SELECT EXISTS (SELECT 1 FROM pg_policy WHERE polrelid = 'ai_prompts'::regclass)")
            gained = await owner.fetchval(
                """SELECT string_agg(name, ', ') FROM (
                       SELECT 'ai_prompts' AS name
                       WHERE has_table_privilege($1, 'ai_prompts', 'SELECT')
                       UNION ALL SELECT 'aimless' WHERE has_table_privilege($1, 'aimless', 'SELECT')
                   ) g""", db.role)
            assert gained is None
        finally:
            await owner.close()
        # The host's function is still executable by everyone, as its owner wanted.
        runtime = await asyncpg.connect(db.runtime_dsn)
        try:
            assert await runtime.fetchval("SELECT ai_summarise('a long essay text')") == \
                "a long ess"
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await runtime.fetchval("SELECT * FROM ai_prompts")
        finally:
            await runtime.close()


async def test_lockdown_twice_changes_nothing(supabase: RuntimeDb,
                                              owner: asyncpg.Connection) -> None:
    snapshot = """SELECT string_agg(relname || ' ' || coalesce(relacl::text, '') || ' '
                                    || relrowsecurity || ' ' || xmin::text, '; ' ORDER BY relname)
                  FROM pg_class WHERE relname LIKE 'ai%'"""
    before = await owner.fetchval(snapshot)
    policy_rows = "SELECT string_agg(xmin::text, ',' ORDER BY oid) FROM pg_policy"
    policies = await owner.fetchval(policy_rows)
    assert await migrate(supabase.owner_dsn, "up") == []
    assert await owner.fetchval(snapshot) == before  # no catalog row rewritten
    assert await owner.fetchval(policy_rows) == policies

