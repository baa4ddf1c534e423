"""A real PostgreSQL for the tests: TEST_DATABASE_URL, or the embedded server."""

from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from aiqueue.migrate import migrate

# One template per test session: sessions may share a server.
TEMPLATE = f"aiqueue_template_{os.getpid()}"
_counter = itertools.count()


def with_database(dsn: str, name: str) -> str:
    """The same server, another database."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{name}"))


def start_server() -> tuple[str, Any]:
    """Admin DSN of the server the tests use, and a handle keeping it alive."""
    url = os.environ.get("TEST_DATABASE_URL")
    if url:
        return url, None
    from aiqueue.embedded import start_embedded

    # A short path: the server's unix socket lives in it.
    return start_embedded(Path(f"/tmp/aiqueue-test-pg-{os.getuid()}"))


async def make_template(admin_dsn: str) -> None:
    """Migrate a template database once per session."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
        await conn.execute(f"CREATE DATABASE {TEMPLATE}")
    finally:
        await conn.close()
    await migrate(with_database(admin_dsn, TEMPLATE), "up")


async def drop_template(admin_dsn: str) -> None:
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
    finally:
        await conn.close()


async def create_test_db(admin_dsn: str) -> str:
    """A fresh database copied from the template; returns its DSN."""
    name = f"aiqueue_t{os.getpid()}_{next(_counter)}"
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    finally:
        await conn.close()
    return with_database(admin_dsn, name)


async def drop_test_db(admin_dsn: str, dsn: str) -> None:
    name = urlsplit(dsn).path.lstrip("/")
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await conn.close()


def run(coro: Any) -> Any:
    return asyncio.run(coro)
