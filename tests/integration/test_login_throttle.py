"""The /ai-queue login throttle lives in the database: every instance counts the same
failures, and failures older than the window are pruned."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import httpx

from aiqueue.queue.actions import LOGIN_FAILURE_LIMIT, LOGIN_FAILURE_WINDOW_SECONDS
from aiqueue.web.app import create_app
from tests.conftest import SECRET, make_settings


@asynccontextmanager
async def instance(db_url: str, address: str = "203.0.113.7"
                   ) -> AsyncIterator[httpx.AsyncClient]:
    """One app instance (its own create_app, pool and memory) seen from `address`."""
    app = create_app(make_settings(db_url))
    transport = httpx.ASGITransport(app=app, client=(address, 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
        yield client
    await app.state.aiqueue.close()


async def login(client: httpx.AsyncClient, password: str) -> int:
    r = await client.post("/ai-queue/login", data={"password": password, "next": "/ai-queue"})
    return r.status_code


async def test_two_instances_share_one_throttle(db_url: str, conn: asyncpg.Connection) -> None:
    async with instance(db_url) as a, instance(db_url) as b:
        # The failures are spread over both instances, as a load balancer would.
        for k in range(LOGIN_FAILURE_LIMIT):
            assert await login(a if k % 2 else b, "wrong-password") == 401
        # Neither instance lets even the right password in now.
        assert await login(a, SECRET) == 429
        assert await login(b, SECRET) == 429
        async with instance(db_url, address="198.51.100.9") as other:
            assert await login(other, SECRET) == 303  # another address is not blocked
        assert await conn.fetchval("SELECT count(*) FROM ai_queue_login_failures") == 5
        # The window passes: the address may try again, on either instance.
        await conn.execute("UPDATE ai_queue_login_failures SET failed_at = failed_at - $1::float8"
                           " * interval '1 second'", LOGIN_FAILURE_WINDOW_SECONDS + 1)
        assert await login(b, SECRET) == 303


async def test_failures_older_than_the_window_are_pruned(db_url: str,
                                                         conn: asyncpg.Connection) -> None:
    await conn.execute(
        "INSERT INTO ai_queue_login_failures (client, failed_at)"
        " SELECT 'old-' || k, now() - $1::float8 * interval '1 second'"
        " FROM generate_series(1, 50) k", LOGIN_FAILURE_WINDOW_SECONDS + 5)
    async with instance(db_url) as a:
        assert await login(a, "wrong-password") == 401
    rows = await conn.fetch("SELECT client FROM ai_queue_login_failures")
    assert [r["client"] for r in rows] == ["203.0.113.7"]
