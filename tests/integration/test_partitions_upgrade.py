"""The upgrade to month partitions (migration 0050) and back: no row lost or changed."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg
import pytest

from aiqueue.db.migrate import discover, migrate, prepare
from aiqueue.db.store import Store
from aiqueue.models import Completed
from tests.conftest import add_submissions
from tests.integration.partitions_kit import heard_while_migrating
from tests.plans import plan_of

# It migrates its database down and up again: a new copy of the template.
pytestmark = pytest.mark.fresh_db

TABLES = ("ai_marking_attempts", "ai_marking_results", "ai_marking_events", "ai_marking_queue")
IDENTITY = {"ai_marking_attempts": "id", "ai_marking_results": "seq", "ai_marking_events": "id"}
# The tables whose old rows the steps prove, so that the upgrade attaches them unread:
# the history tables (0050).
PROVED = list(IDENTITY)


def since_partitions() -> int:
    """How many migrations, from the partitions' on."""
    return sum(1 for m in discover() if m.version >= "0050")


async def contents(conn: asyncpg.Connection) -> dict[str, tuple[int, str]]:
    """Each table's row count and a hash of every row's text.  The record's `phase`
    (migration 0067) is a generated column, derived from its status, its
    `queue_moves` (0070) a count of the queue's own moves that starts at 0, and an
    attempt's `handed_by` (0076) empty on every line from before it: all left out (the
    schema the rows are read at first has none of them)."""
    found = {}
    for table in TABLES:
        row = await conn.fetchrow(
            "SELECT count(*) AS n, md5(coalesce(string_agg(r, E'\\n' ORDER BY r), '')) AS h"
            " FROM (SELECT (to_jsonb(t) - 'phase' - 'queue_moves' - 'handed_by')::text AS r"
            f" FROM {table} t) x")
        found[table] = (row["n"], row["h"])
    return found


async def rows_in_every_state(store: Store, conn: asyncpg.Connection) -> None:
    """Pending, processing, completed and failed rows with their history, some of it old."""
    ids = await add_submissions(conn, 12, "hw-up")
    await store.enqueue(ids, "hw-up", 0, {})
    for n in range(8):
        job = await store.claim(plan_of(0, 5))
        assert job is not None
        if n < 4:
            await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": n}, None),
                                 plan_of())
        elif n < 6:
            await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=False,
                                       max_attempts=1, error="e", outcome="failed")
    # History from last year and last month, as a database in use has.
    for days, share in ((400, 3), (40, 5)):
        back = timedelta(days=days)
        await conn.execute(f"UPDATE ai_marking_attempts SET started_at = started_at - $1::interval "
                           f"WHERE id % {share} = 0", back)
        await conn.execute(f"UPDATE ai_marking_results SET applied_at = applied_at - $1::interval "
                           f"WHERE seq % {share} = 0", back)
        await conn.execute(f"UPDATE ai_marking_events SET created_at = created_at - $1::interval "
                           f"WHERE id % {share} = 0", back)


async def test_the_upgrade_and_its_rollback_keep_every_row(
    db_url: str, store: Store, conn: asyncpg.Connection
):
    # The rows are made by today's code, then carried down to the schema before the
    # partitions (the down migrations keep them): today's functions need today's schema.
    await rows_in_every_state(store, conn)
    steps = since_partitions()
    assert len(await migrate(db_url, "down", steps=steps)) == steps
    assert await conn.fetchval("SELECT relkind::text FROM pg_class "
                               "WHERE relname = 'ai_marking_attempts'") == "r"
    before = await contents(conn)
    assert all(n > 0 for n, _ in before.values())
    last = {t: await conn.fetchval(f"SELECT max({c}) FROM {t}") for t, c in IDENTITY.items()}

    await migrate(db_url, "up")
    assert await contents(conn) == before
    for table in IDENTITY:
        assert await conn.fetchval("SELECT relkind::text FROM pg_class WHERE relname = $1",
                                   table) == "p"
        # Every row is in the partition of everything before next month.
        parts = await conn.fetch(f"SELECT DISTINCT tableoid::regclass::text AS p FROM {table}")
        assert [r["p"] for r in parts] == [
            await conn.fetchval("SELECT name FROM aiqueue_partitions() WHERE parent = $1::regclass"
                                " AND lower_bound IS NULL AND NOT is_default", table)]
    # The queue works on: a new row's history counts on from the old ids.
    (sub,) = await add_submissions(conn, 1, "hw-after")
    await store.enqueue([sub], "hw-after", 0, {})
    while (job := await store.claim(plan_of(0, 5))) is not None:
        await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                             plan_of())
    for table, column in IDENTITY.items():
        assert await conn.fetchval(f"SELECT max({column}) FROM {table}") > last[table]
    during = await contents(conn)

    assert len(await migrate(db_url, "down", steps=steps)) == steps
    assert await contents(conn) == during
    assert await conn.fetchval("SELECT relkind::text FROM pg_class "
                               "WHERE relname = 'ai_marking_results'") == "r"
    await migrate(db_url, "up")
    assert await contents(conn) == during


async def test_the_upgrade_reads_no_row_under_its_lock(
    db_url: str, store: Store, conn: asyncpg.Connection
):
    """The preparation steps prove the old rows fit (a validated CHECK, under a weak lock),
    so the upgrade's ATTACH trusts it instead of scanning; the reviewed results' index is
    built concurrently beforehand and attached, not built (aiqueue/db/migrate.py prepare)."""
    steps = since_partitions()
    await rows_in_every_state(store, conn)
    await migrate(db_url, "down", steps=steps)
    await conn.execute("UPDATE ai_marking_results SET review = 'accepted' WHERE seq % 2 = 0")
    assert await prepare(conn, None) >= 3
    proofs = await conn.fetch(
        "SELECT conname, convalidated FROM pg_constraint WHERE conname LIKE '%\\_before\\_%'")
    assert sorted(r["conname"].rsplit("_before_")[0] for r in proofs) == sorted(PROVED)
    assert all(r["convalidated"] for r in proofs)
    assert await conn.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = "
                               "'ai_marking_results_reviewed_idx'") == 1
    heard = await heard_while_migrating(conn, "0050")
    implied = [t for t in PROVED
               if any(f'for table "{t}_upto_' in h and "implied" in h for h in heard)]
    assert implied == PROVED, heard
    # None of the big tables is read (a later migration may check a small one, such as
    # the fair groups' table of one row a group).
    # The record's old rows are read once, by the ATTACH that checks they have all
    # ended: from a schema before 0077, 0078 takes its one-transaction path (its steps
    # copy the ended rows only from 0077: tests/integration/test_record_upgrade.py).
    record = 'verifying table "ai_marking_queue_ended_upto_'
    assert [h for h in heard if h.startswith("verifying table")
            and any(f'"{t}' in h for t in TABLES)] == [
                next(h for h in heard if h.startswith(record))], heard
    # Every index the old rows need was there before (the reviewed results' built
    # concurrently by the steps): the upgrade attaches them and builds none on them.
    assert not [h for h in heard if h.startswith("building index") and "_upto_" in h], heard

    before = await contents(conn)
    await migrate(db_url, "up")
    assert await contents(conn) == before
    assert await conn.fetchval("SELECT count(*) FROM pg_constraint "
                               "WHERE conname LIKE '%\\_before\\_%'") == 0
    assert await conn.fetchval(
        "SELECT count(*) FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid"
        " WHERE c.relname LIKE 'ai\\_marking\\_results\\_reviewed\\_idx%'"
        " AND NOT x.indisvalid") == 0


async def test_instances_upgrading_at_once_apply_it_once(
    db_url: str, store: Store, conn: asyncpg.Connection
):
    """Three instances start on a database before the partitions: one prepares and applies,
    the others wait for the lock without blocking its concurrent index builds."""
    steps = since_partitions()
    await rows_in_every_state(store, conn)
    await migrate(db_url, "down", steps=steps)
    before = await contents(conn)
    done = await asyncio.gather(*(migrate(db_url, "up") for _ in range(3)))
    assert sorted(len(d) for d in done) == [0, 0, steps]
    assert await contents(conn) == before
