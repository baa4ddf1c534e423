"""Shared fixtures: a real PostgreSQL, one migrated template, a fresh database per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest

from aiqueue.settings import Settings
from tests import pg

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
SECRET = "test-secret-0123456789abcdef"


@pytest.fixture(scope="session")
def pg_admin() -> Iterator[str]:
    dsn, handle = pg.start_server()
    pg.run(pg.make_template(dsn))
    yield dsn
    pg.run(pg.drop_template(dsn))
    del handle


@pytest.fixture
async def db_url(pg_admin: str) -> AsyncIterator[str]:
    dsn = await pg.create_test_db(pg_admin)
    yield dsn
    await pg.drop_test_db(pg_admin, dsn)


@pytest.fixture
async def conn(db_url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(db_url)
    yield connection
    await connection.close()


def make_settings(db_url: str, **overrides: Any) -> Settings:
    base = Settings(
        database_url=db_url,
        database_direct_url=db_url,
        queue_secret=SECRET,
        admin_password=SECRET,
        app_base_url="http://app.test",
        function_url="http://function.test/mark",
        callback_url="http://app.test/webhooks/ai-mark",
        retry_base_seconds=0.0,
        tick_seconds=0.0,
    )
    return base.with_overrides(**overrides)


async def add_submissions(
    conn: asyncpg.Connection, n: int, assignment_id: str = "hw-1", content: str = "answer"
) -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in range(n)]
    await conn.executemany(
        "INSERT INTO submissions (id, assignment_id, content) VALUES ($1, $2, $3)",
        [(i, assignment_id, f"{content} {k}") for k, i in enumerate(ids)],
    )
    return ids
