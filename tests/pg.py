"""A real PostgreSQL for the tests: TEST_DATABASE_URL, or the embedded server."""

from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from aiqueue.db.embedded import recreate_database, with_database
from aiqueue.db.migrate import migrate
from tests.dbpool import state

# One template per test session: sessions may share a server.
TEMPLATE = f"aiqueue_template_{os.getpid()}"
_counter = itertools.count()


def start_server() -> tuple[str, Any]:
    """Admin DSN of the server the tests use, and a handle keeping it alive."""
    url = os.environ.get("TEST_DATABASE_URL")
    if url:
        return url, None
    from aiqueue.db.embedded import start_embedded

    # A short path: the server's unix socket lives in it.
    dsn, handle = start_embedded(Path(f"/tmp/aiqueue-test-pg-{os.getuid()}"))
    run(_no_fsync(dsn))
    return dsn, handle


async def _no_fsync(admin_dsn: str) -> None:
    """fsync off on the tests' own server: a crash there is a process crash (the
    chaos tests' kill -9), never an OS crash, so nothing committed is lost; without
    it every CREATE/DROP DATABASE and TRUNCATE waits for the disk."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        if await conn.fetchval("SHOW fsync") == "on":
            await conn.execute("ALTER SYSTEM SET fsync = off")
            await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


async def make_template(admin_dsn: str) -> None:
    """Migrate a template database once per session."""
    dsn = await recreate_database(admin_dsn, TEMPLATE)
    await migrate(dsn, "up")
    await _analyze_what_autovacuum_would(dsn)


async def _analyze_what_autovacuum_would(dsn: str) -> None:
    """ANALYZE now each table the migrations wrote more rows into than autovacuum's
    threshold (its first analysis comes at 50 changed rows: `aiqueue_migrations` from the
    51st migration on). Left to autovacuum, it would come a minute into the session, after
    the template's state was read, and every later copy would differ from that state."""
    conn = await asyncpg.connect(dsn)
    try:
        threshold = int(await conn.fetchval("SHOW autovacuum_analyze_threshold"))
        tables = await conn.fetch("SELECT c.oid::regclass::text FROM pg_class c"
                                  " WHERE c.relkind = 'r'"
                                  " AND c.relnamespace = 'public'::regnamespace")
        for (table,) in tables:
            if await conn.fetchval(f"SELECT count(*) FROM {table}") > threshold:
                await conn.execute(f"ANALYZE {table}")
    finally:
        await conn.close()


async def template_state(admin_dsn: str) -> dict[str, object]:
    """The template's tables, sequences, relations and catalog (tests/dbpool.py's `state`)."""
    conn = await asyncpg.connect(with_database(admin_dsn, TEMPLATE))
    try:
        return await state(conn)
    finally:
        await conn.close()


async def drop_template(admin_dsn: str) -> None:
    await recreate_database(admin_dsn, TEMPLATE, create=False)


def next_name() -> str:
    """A database name of this session's own."""
    return f"aiqueue_t{os.getpid()}_{next(_counter)}"


async def create_test_db(admin_dsn: str) -> str:
    """A fresh database copied from the template; returns its DSN."""
    return await recreate_database(admin_dsn, next_name(), template=TEMPLATE)


async def drop_test_db(admin_dsn: str, dsn: str) -> None:
    await recreate_database(admin_dsn, urlsplit(dsn).path.lstrip("/"), create=False)


def run(coro: Any) -> Any:
    return asyncio.run(coro)
