"""A real PostgreSQL for the tests: TEST_DATABASE_URL, or the embedded server."""

from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiqueue.db.embedded import recreate_database
from aiqueue.db.migrate import migrate

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
    return start_embedded(Path(f"/tmp/aiqueue-test-pg-{os.getuid()}"))


async def make_template(admin_dsn: str) -> None:
    """Migrate a template database once per session."""
    await migrate(await recreate_database(admin_dsn, TEMPLATE), "up")


async def drop_template(admin_dsn: str) -> None:
    await recreate_database(admin_dsn, TEMPLATE, create=False)


async def create_test_db(admin_dsn: str) -> str:
    """A fresh database copied from the template; returns its DSN."""
    name = f"aiqueue_t{os.getpid()}_{next(_counter)}"
    return await recreate_database(admin_dsn, name, template=TEMPLATE)


async def drop_test_db(admin_dsn: str, dsn: str) -> None:
    await recreate_database(admin_dsn, urlsplit(dsn).path.lstrip("/"), create=False)


def run(coro: Any) -> Any:
    return asyncio.run(coro)
