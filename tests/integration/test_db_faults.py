"""Database faults at the store: bounded waits, fresh connections, one safe retry.

Every test talks to the real PostgreSQL through tests/e2e/faultproxy.py and
breaks the connection on purpose.  Limits are shortened so the suite stays
quick; the assertions are about what happened, with generous time bounds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import asyncpg
import pytest

from aiqueue.db.listener import ChangeListener
from aiqueue.db.pool import Limits
from aiqueue.db.store import Store, connect_pool
from aiqueue.errors import DatabaseTimeout, StoreError
from aiqueue.reads.live import EventHub, LiveConfig
from aiqueue.runtime import Runtime
from aiqueue.web.http import error_response
from tests.conftest import add_submissions, enqueued, make_settings
from tests.e2e.faultproxy import FaultProxy
from tests.plans import plan_of

LIMITS = Limits(hot=1.0, page=1.5, connect=1.0, check_idle_after=0.3, ping=0.3)


@pytest.fixture
def proxy(db_url: str) -> Iterator[FaultProxy]:
    p = FaultProxy(db_url)
    yield p
    p.close()


@pytest.fixture
async def proxied(proxy: FaultProxy, db_url: str) -> AsyncIterator[Store]:
    """A Store whose connections pass through the fault proxy."""
    s = Store(await connect_pool(proxy.dsn(_name(db_url)), max_size=3, limits=LIMITS))
    yield s
    await s.close()


def _name(dsn: str) -> str:
    return urlsplit(dsn).path.lstrip("/")


async def _enqueue(store: Store, ids: list[uuid.UUID]) -> int:
    outcome = enqueued(await store.enqueue(ids, "hw-1", 0, {}))
    return len(outcome.queue_ids)


async def test_a_silent_drop_costs_one_deadline_then_a_fresh_connection_answers(
    proxied: Store, proxy: FaultProxy, conn: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    ids = await add_submissions(conn, 2)
    assert await _enqueue(proxied, ids[:1]) == 1
    assert proxy.silent_drop() >= 1
    caplog.set_level(logging.INFO, logger="aiqueue")
    started = time.monotonic()
    # The connection is reused at once (not idle long enough for a ping): its
    # deadline passes, it is dropped, and the retry runs on a new connection.
    assert await _enqueue(proxied, ids[1:]) == 1
    assert LIMITS.hot * 0.9 <= time.monotonic() - started < LIMITS.hot + 2.0
    retries = [json.loads(r.getMessage()) for r in caplog.records if r.name == "aiqueue"]
    assert [(e["outcome"], e["code"]) for e in retries] == [("retry", "TimeoutError")]
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 2


async def test_after_a_thaw_an_idle_dead_connection_is_noticed_by_a_short_ping(
    proxied: Store, proxy: FaultProxy, conn: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    assert await proxied.ping()
    proxy.silent_drop()
    await asyncio.sleep(LIMITS.check_idle_after + 0.2)  # "frozen" while the network forgot us
    caplog.set_level(logging.INFO, logger="aiqueue")
    started = time.monotonic()
    assert await proxied.ping()
    # The ping's short limit, not the call's deadline, found the dead connection:
    # the call itself ran once, on a fresh connection.
    events = [json.loads(r.getMessage())["outcome"] for r in caplog.records
              if r.name == "aiqueue"]
    assert events == ["stale_connection"]
    assert time.monotonic() - started < LIMITS.hot + 1.0
    ids = await add_submissions(conn, 1)
    assert await _enqueue(proxied, ids) == 1


async def test_a_cut_connection_is_replaced_and_the_call_retried(
    proxied: Store, proxy: FaultProxy, conn: asyncpg.Connection
) -> None:
    await proxied.ping()
    assert proxy.cut() >= 1
    ids = await add_submissions(conn, 1)
    assert await _enqueue(proxied, ids) == 1


async def test_a_stall_past_both_attempts_is_a_503_and_nothing_is_applied(
    proxied: Store, proxy: FaultProxy, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 3)
    await proxied.ping()
    proxy.stall(2 * LIMITS.hot + 1.5)
    started = time.monotonic()
    with pytest.raises(DatabaseTimeout) as caught:
        await proxied.enqueue(ids, "hw-1", 0, {})
    assert time.monotonic() - started < 2 * LIMITS.hot + 1.0
    response = error_response(caught.value)
    assert response.status_code == 503 and response.headers["retry-after"] == "2"
    assert json.loads(bytes(response.body))["error"] == "database_timeout"
    await asyncio.sleep(2.0)  # the stall ends; whatever was stuck reaches the server
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0
    assert await _enqueue(proxied, ids) == 3


async def test_a_claim_after_a_silent_drop_is_retried_and_the_cap_holds(
    proxied: Store, proxy: FaultProxy, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 2)
    assert await _enqueue(proxied, ids) == 2
    proxy.silent_drop()
    assert await proxied.claim(plan_of(1, 5)) is not None
    assert await proxied.claim(plan_of(1, 5)) is None  # the cap of 1 holds: one row processing
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE status = 'processing'") == 1


async def test_the_server_stops_waiting_on_a_lock_with_the_client(
    proxied: Store, conn: asyncpg.Connection
) -> None:
    async with conn.transaction():
        await conn.execute("LOCK TABLE ai_queue_control IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        with pytest.raises(StoreError):
            await proxied.set_paused(True, "test")
        assert time.monotonic() - started < LIMITS.page + 0.5
    # lock_timeout (SET LOCAL) ended the waiting statement on the server too.
    waiting = await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND datname = current_database()")
    assert waiting == 0
    assert await conn.fetchval("SELECT paused FROM ai_queue_control") is False


async def test_an_instance_never_opens_more_than_database_pool_max(
    db_url: str, conn: asyncpg.Connection
) -> None:
    app = f"aiqueue-pooltest-{uuid.uuid4().hex[:8]}"
    dsn = f"{db_url}{'&' if '?' in db_url else '?'}application_name={app}"
    rt = await Runtime.create(make_settings(dsn, database_pool_max=2), dsn)
    count = ("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
    try:
        async with conn.transaction():
            # Every call queues behind this lock, so the pool is pushed to its limit.
            await conn.execute("LOCK TABLE ai_queue_control IN ACCESS EXCLUSIVE MODE")
            calls = [asyncio.create_task(rt.store.control(5)) for _ in range(12)]
            seen = 0
            for _ in range(10):
                await asyncio.sleep(0.05)
                seen = max(seen, await conn.fetchval(count, app))
            assert seen == 2
        await asyncio.gather(*calls, return_exceptions=True)
        assert await conn.fetchval(count, app) <= 2
    finally:
        await rt.close()


async def test_a_silently_dropped_listener_is_noticed_and_reported(
    proxy: FaultProxy, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ChangeListener, "ANNOUNCE_EVERY", 0.3)
    monkeypatch.setattr(ChangeListener, "ANNOUNCE_TIMEOUT", 0.5)
    lost = asyncio.Event()
    listener = await ChangeListener.open(proxy.dsn(_name(db_url)), "ai_marking",
                                         lambda: None, lost.set)
    try:
        assert listener.alive
        proxy.silent_drop()
        await asyncio.wait_for(lost.wait(), 5)
        assert not listener.alive
    finally:
        await listener.close()


async def test_the_hub_polls_while_its_listener_is_dead_then_listens_again(
    proxy: FaultProxy, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ChangeListener, "ANNOUNCE_EVERY", 0.3)
    monkeypatch.setattr(ChangeListener, "ANNOUNCE_TIMEOUT", 0.5)
    hub = EventHub(proxy.dsn(_name(db_url)), LiveConfig(reconnect_seconds=0.5))
    await hub.join()
    try:
        assert hub.listening
        proxy.silent_drop()
        deadline = time.monotonic() + 5
        while hub.listening:  # a stream polls whenever the hub is not listening
            assert time.monotonic() < deadline, "the dead listener was not noticed"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.6)  # the hub's pause before it tries again
        await hub.ensure_listening()  # what a stream's loop calls each round
        assert hub.listening
    finally:
        hub.leave()
        await hub.close()
