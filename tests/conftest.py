"""Shared fixtures: a real PostgreSQL, one migrated template, a database in its state per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import asyncpg
import httpx
import pytest
import respx
from _pytest.nodeid import NodeId
from starlette.applications import Starlette

from aiqueue.db.embedded import with_database
from aiqueue.models import Enqueued
from aiqueue.settings import Settings
from tests import pg
from tests.dbpool import Pool, Tally, snapshot
from tests.roles import RuntimeDb, runtime_database

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
SECRET = "test-secret-0123456789abcdef"
# The other secrets, long enough for the settings' rules (16+ characters, a password 12+).
CRON = "cron-secret-0123456789abcdef"
METRICS = "metrics-token-0123456789abcdef"
PASSWORD = "operator-password-0123456789"
AUTH = {"authorization": f"Bearer {SECRET}"}
POOL = pytest.StashKey[Pool]()
POOL_TALLY = pytest.StashKey[Tally]()  # the workers' pools, under pytest-xdist
# Where make_settings sends dispatches and chains (mocked with respx, never reached).
FN = "http://function.test/mark"
SELF_CHAIN = "http://app.test/api/marking/process-queue"


@pytest.fixture(scope="session")
def pg_admin() -> Iterator[str]:
    dsn, handle = pg.start_server()
    pg.run(pg.make_template(dsn))
    yield dsn
    pg.run(pg.drop_template(dsn))
    del handle


@pytest.fixture(scope="session")
def pg_pool(pg_admin: str, pytestconfig: pytest.Config) -> Iterator[Pool]:
    """The session's databases, each put back to the template's state before reuse."""
    snap = pg.run(snapshot(with_database(pg_admin, pg.TEMPLATE)))
    pool = pytestconfig.stash[POOL] = Pool(pg_admin, pg.TEMPLATE, snap, pg.next_name)
    if os.environ.get("AIQUEUE_TEST_DB_AUDIT"):
        pool.expected = pg.run(pg.template_state(pg_admin))
    yield pool
    pg.run(pool.close())


@pytest.fixture(scope="session")
async def chromium() -> AsyncIterator[Any]:
    """One headless Chromium for this process's browser tests: each test opens its own
    context (cookies, storage, cache: what a new browser gives it). Starting Playwright and
    a Chromium costs about 2.7 s, once per test before."""
    from playwright.async_api import async_playwright

    from tests.e2e.browser import launch

    async with async_playwright() as pw:
        browser = await launch(pw)
        yield browser
        await browser.close()


@pytest.fixture
async def db_url(pg_admin: str, pg_pool: Pool, request: pytest.FixtureRequest
                 ) -> AsyncIterator[str]:
    """A database as a fresh copy of the migrated template has it: one used before and
    put back (tests/dbpool.py), or, for a test marked `fresh_db`, a new copy."""
    if request.node.get_closest_marker("fresh_db"):
        dsn = await pg.create_test_db(pg_admin)
        yield dsn
        await pg.drop_test_db(pg_admin, dsn)
        return
    dsn = await pg_pool.acquire()
    yield dsn
    pg_pool.release(dsn, request.node.nodeid)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `--dist loadgroup` a test's xdist_group goes into its node id (`…@name`), the
    only thing of it the controller sees. pytest-xdist writes the suffix to `_nodeid`, which
    pytest 9 no longer reads (the id lives in `_id`): without this, every test is scheduled
    on its own, the Vercel build is made on both workers and timed tests run side by side."""
    if not getattr(config.option, "loadgroup", False):  # set on a worker of that mode
        return
    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker hands its pool's tally to the controller."""
    pool, out = session.config.stash.get(POOL, None), getattr(session.config, "workeroutput", None)
    if pool is not None and out is not None:
        out["db_pool"] = (pool.tally.reused, pool.tally.dirtied)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    reused, dirtied = getattr(node, "workeroutput", {}).get("db_pool", (0, []))
    tally = node.config.stash.setdefault(POOL_TALLY, Tally())
    tally.reused += reused
    tally.dirtied += dirtied


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """How often a database was used again, and which tests changed one's catalog
    (marked `fresh_db`, they would not pay for the check and a new copy both)."""
    pool = config.stash.get(POOL, None)
    tally = pool.tally if pool is not None else config.stash.get(POOL_TALLY, None)
    if tally is None:
        return
    terminalreporter.write_line(f"test databases used again: {tally.reused}; "
                                f"changed by a test, so dropped: {len(tally.dirtied)}")
    for nodeid in tally.dirtied:
        terminalreporter.write_line(f"  changed its database's catalog: {nodeid}")


@pytest.fixture
async def runtime_db(pg_admin: str) -> AsyncIterator[RuntimeDb]:
    """A database migrated by its owner with `--runtime-role` for a LOGIN role that the app
    logs in as, as a deployment does (README's Deploy); `owner_dsn` for the test's rows."""
    async with runtime_database(pg_admin) as db:
        yield db


@pytest.fixture
async def conn(db_url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(db_url)
    yield connection
    await connection.close()


def make_settings(db_url: str, **overrides: Any) -> Settings:
    base = Settings(
        database_url=db_url,
        database_direct_url=db_url,
        queue_secrets=(SECRET,),
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


def enqueued(outcome: object) -> Enqueued:
    """The outcome of an enqueue that must have queued its rows (anything else fails here)."""
    assert isinstance(outcome, Enqueued), outcome
    return outcome


@asynccontextmanager
async def app_client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on the app in-process; the app's resources closed afterwards."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://app.test") as c:
        yield c
    await app.state.aiqueue.close()


@contextmanager
def mocked_function() -> Iterator[respx.Route]:
    """The marking function acknowledging every dispatch (202); the chain answered too."""
    with respx.mock(assert_all_called=False) as mock:
        mock.post(SELF_CHAIN).mock(return_value=httpx.Response(200, json={}))
        yield mock.post(FN).mock(return_value=httpx.Response(202))


@pytest.fixture
def function() -> Iterator[respx.Route]:
    """The marking function as a respx route (see mocked_function)."""
    with mocked_function() as route:
        yield route
