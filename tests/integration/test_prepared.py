"""DATABASE_PREPARED_STATEMENTS=auto against a real PostgreSQL: on for a direct connection,
off when something sits between (here the fault proxy, on its own port)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import asyncpg
import pytest

from aiqueue.db.store import Store, connect_pool
from tests.conftest import add_submissions
from tests.e2e.faultproxy import FaultProxy
from tests.plans import plan_of


@pytest.fixture
def proxy(db_url: str) -> Iterator[FaultProxy]:
    p = FaultProxy(db_url)
    yield p
    p.close()


async def _prepared_after_a_claim(store: Store, conn: asyncpg.Connection) -> int:
    await store.enqueue(await add_submissions(conn, 2), "hw-1", 0, {})
    for _ in range(2):
        assert await store.claim(plan_of(0, 5)) is not None

    async def count(c: asyncpg.Connection) -> int:
        # ("[m]" keeps this statement, prepared too, from matching itself.)
        return int(await c.fetchval("SELECT count(*) FROM pg_prepared_statements "
                                    "WHERE statement ~ 'aiqueue_clai[m]\\('"))
    return await store.db.read(count)


async def test_auto_keeps_statements_on_a_direct_connection(
        db_url: str, conn: asyncpg.Connection) -> None:
    store = Store(await connect_pool(db_url, max_size=1))
    try:
        choice = store.db.pool.prepared
        assert choice is not None and choice.on and "direct" in choice.why
        # The claim was prepared once on the connection and kept.
        assert await _prepared_after_a_claim(store, conn) == 1
    finally:
        await store.close()


async def test_auto_is_off_when_the_server_listens_on_another_port(
        db_url: str, proxy: FaultProxy, conn: asyncpg.Connection) -> None:
    store = Store(await connect_pool(proxy.dsn(urlsplit(db_url).path.lstrip("/")), max_size=1))
    try:
        choice = store.db.pool.prepared
        assert choice is not None and not choice.on and "pooler" in choice.why
        assert await _prepared_after_a_claim(store, conn) == 0
    finally:
        await store.close()


async def test_off_is_off_on_a_direct_connection(db_url: str, conn: asyncpg.Connection) -> None:
    store = Store(await connect_pool(db_url, max_size=1, prepared="off"))
    try:
        assert await _prepared_after_a_claim(store, conn) == 0
    finally:
        await store.close()
