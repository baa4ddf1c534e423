"""A month's drop holds its parents' strongest lock for catalog work only: the usage
sums the same pass takes are read before any DETACH (functions/97_partitions.sql)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from aiqueue.db.store import Store
from tests.integration.partitions_kit import (
    HISTORY,
    add_month,
    ended_rows,
    month_start,
    place,
    where,
    without_upgrade_partition,
)

# Each test makes and drops partitions: a new copy of the template each.
pytestmark = pytest.mark.fresh_db

# Records, at each write of the usage sums, whether this session then holds the
# results' ACCESS EXCLUSIVE lock (a DETACH's, held to the transaction's end).
WATCH = """
CREATE TABLE seen_locks (exclusive boolean NOT NULL);
CREATE FUNCTION seen_lock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO seen_locks SELECT EXISTS (
        SELECT 1 FROM pg_locks l WHERE l.pid = pg_backend_pid() AND l.granted
          AND l.relation = 'ai_marking_results'::regclass AND l.mode = 'AccessExclusiveLock');
    RETURN NULL;
END $$;
CREATE TRIGGER seen_lock AFTER INSERT ON ai_marking_usage_hours
    FOR EACH STATEMENT EXECUTE FUNCTION seen_lock();
"""


async def test_the_usage_sums_are_read_before_a_month_is_detached(
    store: Store, conn: asyncpg.Connection
) -> None:
    await without_upgrade_partition(conn)
    whole = month_start(datetime.now(UTC) - timedelta(seconds=HISTORY)) - timedelta(days=15)
    old = await ended_rows(store, conn, 2, "completed")
    await place(conn, old, whole)
    for parent in ("ai_marking_attempts", "ai_marking_results"):
        await add_month(conn, parent, whole)
    await conn.execute(WATCH)
    try:
        dropped = await conn.fetchval("SELECT dropped FROM aiqueue_keep_partitions($1, 0)",
                                      HISTORY)
        assert dropped >= 2
        assert await where(conn, "ai_marking_results", old) == set()
        seen = [r["exclusive"] for r in await conn.fetch("SELECT exclusive FROM seen_locks")]
        # The sums were written (hours of the last days not summed yet), and never
        # under the lock the month's DETACH took.
        assert seen and not any(seen)
    finally:
        await conn.execute("DROP TABLE seen_locks; DROP FUNCTION seen_lock() CASCADE")
