"""The upgrade to month partitions (migration 0050) on tables of `n` rows each: how long
`migrate up` holds its lock (one transaction) and that no row is lost (bench/scale.py)."""

from __future__ import annotations

import time

import asyncpg

from aiqueue.db.embedded import recreate_database
from aiqueue.db.migrate import discover, migrate
from bench.common import admin_dsn
from bench.db import seed_queue
from bench.scale_build import _HISTORY

_COUNT = ("SELECT (SELECT count(*) FROM ai_marking_attempts), "
          "(SELECT count(*) FROM ai_marking_results), (SELECT count(*) FROM ai_marking_events)")


async def upgrade_seconds(n: int, name: str) -> float:
    """Seconds `migrate up` takes from the schema before 0050, with `n` rows in each of
    attempts, results and events (their rows spread over a week)."""
    dsn = await recreate_database(admin_dsn(), name)
    try:
        before = sum(1 for m in discover() if m.version < "0050")
        await migrate(dsn, "up", steps=before)
        await seed_queue(dsn, n, "completed")
        conn = await asyncpg.connect(dsn, command_timeout=None)
        try:
            await conn.execute("SET statement_timeout = 0")
            for statement in filter(str.strip, _HISTORY.split(";\n")):
                await conn.execute(statement.replace("interval '1 day'", "interval '8 days'"))
            await conn.execute("VACUUM ANALYZE")
            counts = tuple(await conn.fetchrow(_COUNT))
            started = time.perf_counter()
            await migrate(dsn, "up")
            elapsed = time.perf_counter() - started
            assert tuple(await conn.fetchrow(_COUNT)) == counts, "the upgrade lost rows"
            return elapsed
        finally:
            await conn.close()
    finally:
        await recreate_database(admin_dsn(), name, create=False)
