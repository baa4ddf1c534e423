"""The teacher's results page in-process: the demo class on a paused queue, the login and its
CSRF token."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from aiqueue.db.store import Store, connect_pool
from aiqueue.dev import demo
from aiqueue.web.app import create_app
from tests.conftest import SECRET, make_settings

PAGE = f"/results/assignments/{demo.ASSIGNMENT_ID}"
JSON = {"accept": "application/json"}


@pytest.fixture
async def app_client(db_url: str, conn: asyncpg.Connection) -> AsyncIterator[httpx.AsyncClient]:
    # Paused: the kick after "Mark All" claims nothing, rows stay where the test puts them.
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    store = Store(await connect_pool(db_url, max_size=2))
    await demo.seed(store)
    await store.close()
    app = create_app(make_settings(db_url))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://app.test") as c:
        yield c
    await app.state.aiqueue.close()


async def login(client: httpx.AsyncClient) -> str:
    """Sign in; the CSRF token of the session, read from the page."""
    r = await client.post("/ai-queue/login", data={"password": SECRET, "next": PAGE})
    assert r.status_code == 303 and r.headers["location"] == PAGE
    page = await client.get(PAGE)
    assert page.status_code == 200
    match = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert match
    return match[1]
