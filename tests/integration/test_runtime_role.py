"""`migrate up --runtime-role ROLE`: the role runs the queue and can do nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from aiqueue import cli
from aiqueue.db.migrate import may_migrate, migrate
from aiqueue.db.store import Store, connect_pool
from aiqueue.errors import StoreError
from aiqueue.models import Completed
from aiqueue.models.records import ReplayFilter, ReplayOutcome
from tests.conftest import add_submissions, enqueued
from tests.plans import plan_of, settle_one
from tests.roles import RuntimeDb, runtime_database


@pytest.fixture
async def db(pg_admin: str) -> AsyncIterator[RuntimeDb]:
    async with runtime_database(pg_admin) as made:
        owner = await asyncpg.connect(made.owner_dsn)
        try:
            # A table of the host's that has nothing to do with the queue.
            await owner.execute("CREATE TABLE grades (id int, grade text)")
            await owner.execute("INSERT INTO grades VALUES (1, 'A')")
        finally:
            await owner.close()
        yield made


@pytest.fixture
async def rt(db: RuntimeDb) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(db.runtime_dsn)
    assert await conn.fetchval("SELECT current_user") == db.role
    yield conn
    await conn.close()


FORBIDDEN = [
    "CREATE TABLE ai_marking_more (id int)",
    "CREATE TABLE public.anything (id int)",
    "CREATE SCHEMA mine",
    "CREATE FUNCTION aiqueue_more() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "CREATE VIEW ai_marking_peek AS SELECT 1",
    "CREATE INDEX ON ai_marking_queue (assignment_id)",
    "ALTER TABLE ai_marking_queue ADD COLUMN x int",
    "ALTER TABLE ai_marking_queue DISABLE ROW LEVEL SECURITY",
    "ALTER TABLE submissions ADD COLUMN x int",
    "ALTER FUNCTION aiqueue_buckets() SECURITY DEFINER",
    "DROP TABLE ai_marking_results",
    "DROP TABLE submissions",
    "DROP VIEW ai_marking_event_feed",
    "DROP FUNCTION aiqueue_buckets()",
    "DROP POLICY aiqueue_runtime ON ai_marking_queue",
    "TRUNCATE ai_marking_queue",
    "TRUNCATE submissions",
    "TRUNCATE aiqueue_migrations",
    "SELECT * FROM grades",
    "UPDATE grades SET grade = 'F'",
    "INSERT INTO submissions (assignment_id) VALUES ('x')",
    "DELETE FROM submissions",
    "UPDATE submissions SET content = 'changed'",
    "DELETE FROM aiqueue_migrations",
    "UPDATE aiqueue_meta SET value = 'x'",
]


async def test_the_runtime_role_can_create_alter_drop_or_truncate_nothing(
    rt: asyncpg.Connection,
) -> None:
    allowed = []
    for statement in FORBIDDEN:
        try:
            async with rt.transaction():
                await rt.execute(statement)
            allowed.append(statement)
        except asyncpg.InsufficientPrivilegeError as exc:
            assert "must be owner" in str(exc) or "permission denied" in str(exc), exc
    assert allowed == []
    # Without a grant option a GRANT only warns; it must give nothing away.
    await rt.execute("GRANT SELECT ON ai_marking_queue TO PUBLIC")
    assert not await rt.fetchval("SELECT has_table_privilege('public', 'ai_marking_queue',"
                                 " 'SELECT')")


async def test_the_runtime_role_reads_the_queue_and_marks_submissions(
    db: RuntimeDb, rt: asyncpg.Connection
) -> None:
    owner = await asyncpg.connect(db.owner_dsn)
    try:
        subs = await add_submissions(owner, 2, "hw-rt")
    finally:
        await owner.close()
    store = Store(await connect_pool(db.runtime_dsn, max_size=2))
    try:
        outcome = enqueued(await store.enqueue(subs, "hw-rt", 0, {"rubric": "r"}))
        assert len(outcome.queue_ids) == 2
        job = await store.claim(plan_of(0, 5))
        assert job is not None and job.content.startswith("answer")
        applied, _next = await settle_one(store,
                                          Completed(job.queue_id, job.dispatch_seq,
                                                    {"score": 1, "max_score": 2}),
                                          plan_of(0, 5))
        assert applied
        assert (await store.stats()).completed == 1
        # A school's data as the runtime role: retention, replay, export, erase.
        assert (await store.retain(86400, 86400, every_seconds=0)).ran
        replayed = await store.replay(ReplayFilter(), dry_run=False, actor="rt")
        assert isinstance(replayed, ReplayOutcome) and replayed.matched == 0
        assert len(await store.export_results(datetime(2000, 1, 1, tzinfo=UTC),
                                              datetime(2100, 1, 1, tzinfo=UTC), 0, 10,
                                              True)) == 1
        assert (await store.erase([job.submission_id], "api"))["submissions"] == 1
        assert await store.queue_exposures() == []
    finally:
        await store.close()
    # One marked, then erased.
    assert await rt.fetchval("SELECT count(*) FROM submissions WHERE ai_marked_at IS NULL") == 2


async def test_only_the_owner_may_migrate(db: RuntimeDb) -> None:
    assert await may_migrate(db.owner_dsn)
    assert not await may_migrate(db.runtime_dsn)
    with pytest.raises(StoreError):
        await migrate(db.runtime_dsn, "up")


async def test_migrate_keeps_the_runtime_role_and_a_new_one_replaces_it(
    db: RuntimeDb, pg_admin: str
) -> None:
    # A later `migrate up` without the option keeps the recorded role's grants.
    assert await migrate(db.owner_dsn, "up") == []
    rt = await asyncpg.connect(db.runtime_dsn)
    try:
        assert await rt.fetchval("SELECT count(*) FROM ai_marking_queue") == 0
    finally:
        await rt.close()
    # A role that doesn't exist is refused with its name, changing nothing.
    with pytest.raises(StoreError, match="no_such_role_x"):
        await migrate(db.owner_dsn, "up", runtime_role="no_such_role_x")
    async with runtime_database(pg_admin) as other:
        # Hand this database to the other run's role: the first one loses everything.
        await migrate(db.owner_dsn, "up", runtime_role=other.role)
        rt = await asyncpg.connect(db.runtime_dsn)
        try:
            for statement in ("SELECT count(*) FROM ai_marking_queue",
                              "SELECT count(*) FROM submissions",
                              "SELECT * FROM aiqueue_claim('{}'::jsonb)"):
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await rt.fetchval(statement)
        finally:
            await rt.close()
        owner = await asyncpg.connect(db.owner_dsn)
        try:
            assert await owner.fetchval(
                "SELECT has_table_privilege($1, 'ai_marking_queue', 'SELECT')", other.role)
            # Back to the first role, so the database can be dropped with its role.
            await migrate(db.owner_dsn, "up", runtime_role=db.role)
        finally:
            await owner.close()


def test_migrate_cli_refuses_runtime_role_with_down(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["migrate", "down", "--runtime-role", "someone"]) == 2
    assert "--runtime-role" in capsys.readouterr().err
