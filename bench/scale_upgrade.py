"""The upgrades to month partitions (migrations 0050-0052, on tables of `n` rows each) and of
the record to its live table and ended months (0078, a record of `n` rows): how long their
preparation steps run (weak locks: reads and writes go on) and how long `migrate up`'s
transaction then holds its locks, against the same migrations run in one transaction
without the steps; no row lost (bench/scale.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import asyncpg

from aiqueue.db.embedded import recreate_database
from aiqueue.db.migrate import discover, migrate, prepare
from bench.common import admin_dsn
from bench.db import seed_queue
from bench.scale_build import _HISTORY

_COUNT = ("SELECT (SELECT count(*) FROM ai_marking_attempts), "
          "(SELECT count(*) FROM ai_marking_results), (SELECT count(*) FROM ai_marking_events)")


@dataclass(frozen=True)
class Upgrade:
    """Seconds: the steps (weak locks); the migrations alone in one transaction after
    them (rolled back), and `migrate up` after them (the functions and the lockdown too);
    the migrations alone in one transaction without the steps (as before them)."""

    steps: float
    prepared: float
    locked: float
    unprepared: float


async def _completed_before(version: str, n: int, name: str) -> str:
    """A new database `name` on the schema before migration `version`, with `n` completed
    record rows (bench/db.py's seed_queue)."""
    dsn = await recreate_database(admin_dsn(), name)
    await migrate(dsn, "up", steps=sum(1 for m in discover() if m.version < version))
    await seed_queue(dsn, n, "completed")
    return dsn


async def _seeded(n: int, name: str) -> str:
    """A database on the schema before 0050 with `n` rows in each of attempts, results and
    events (their rows spread over a week), a tenth of the results reviewed."""
    dsn = await _completed_before("0050", n, name)
    conn = await asyncpg.connect(dsn, command_timeout=None)
    try:
        await conn.execute("SET statement_timeout = 0")
        for statement in filter(str.strip, _HISTORY.split(";\n")):
            await conn.execute(statement.replace("interval '1 day'", "interval '8 days'"))
        await conn.execute("UPDATE ai_marking_results SET review = 'accepted' WHERE seq % 10 = 0")
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()
    return dsn


async def _unprepared(dsn: str) -> float:
    """Seconds the pending migrations' SQL takes in one transaction (rolled back)."""
    conn = await asyncpg.connect(dsn, command_timeout=None)
    try:
        applied = {r["version"] for r in await conn.fetch("SELECT version FROM aiqueue_migrations")}
        tr = conn.transaction()
        await tr.start()
        started = time.perf_counter()
        try:
            for m in discover():
                if m.version not in applied:
                    await conn.execute(m.up.read_text())
            return time.perf_counter() - started
        finally:
            await tr.rollback()
    finally:
        await conn.close()


async def _both_ways(dsn: str, name: str, count: str) -> Upgrade:
    """The pending upgrade of database `name` (at `dsn`) timed with its steps, and on a
    copy without them (see Upgrade); `count` reads what no way may lose or change."""
    copy = f"{name}_plain"
    try:
        unprepared = await _unprepared(await recreate_database(
            admin_dsn(), copy, template=urlsplit(dsn).path.lstrip("/")))
        conn = await asyncpg.connect(dsn, command_timeout=None)
        try:
            counts = [tuple(r) for r in await conn.fetch(count)]
            started = time.perf_counter()
            await prepare(conn, None)
            steps = time.perf_counter() - started
            prepared = await _unprepared(dsn)
            started = time.perf_counter()
            await migrate(dsn, "up")
            locked = time.perf_counter() - started
            assert [tuple(r) for r in await conn.fetch(count)] == counts, \
                "the upgrade lost or changed rows"
            return Upgrade(steps, prepared, locked, unprepared)
        finally:
            await conn.close()
    finally:
        for db in (name, copy):
            await recreate_database(admin_dsn(), db, create=False)


async def upgrade_times(n: int, name: str) -> Upgrade:
    """The upgrade of a database of `n` rows a table, both ways (see Upgrade)."""
    return await _both_ways(await _seeded(n, name), name, _COUNT)


_RECORD_COUNT = ("SELECT status, count(*) AS n, sum(attempts) AS attempts "
                 "FROM ai_marking_queue GROUP BY status ORDER BY status")


async def record_upgrade_times(n: int, name: str, pending_every: int = 100) -> Upgrade:
    """The record from one table (0077) to its live table and ended months (0078) with `n`
    record rows, one in `pending_every` of them pending, the rest completed over a week,
    both ways (see Upgrade); no row lost or changed in status or attempts."""
    dsn = await _completed_before("0078", n, name)
    conn = await asyncpg.connect(dsn, command_timeout=None)
    try:
        await conn.execute("SET statement_timeout = 0")
        await conn.execute("ALTER TABLE ai_marking_queue DISABLE TRIGGER USER")
        await conn.execute(
            "UPDATE ai_marking_queue SET status = 'pending', finished_at = NULL "
            "WHERE seq % $1 = 0", pending_every)
        await conn.execute("ALTER TABLE ai_marking_queue ENABLE TRIGGER USER")
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()
    return await _both_ways(dsn, name, _RECORD_COUNT)
