"""Through a real transaction pooler: PgBouncer in transaction mode.

`serve` with DATABASE_URL on PgBouncer and DATABASE_DIRECT_URL on the server
runs the chain, takes the function's webhooks, serves the /ai-queue pages and
streams live events (LISTEN on the direct URL); an app without a direct URL
streams them by polling, also through the pooler.  Needs the `pgbouncer`
binary: skipped without it, required in CI (AIQUEUE_REQUIRE_PGBOUNCER=1).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Iterator
from typing import Any
from unittest.mock import ANY
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from aiqueue.db import prepared
from aiqueue.doctor.checks import check_pooler
from aiqueue.doctor.report import Doctor
from aiqueue.reads.live import LiveConfig
from aiqueue.web.app import create_app
from aiqueue.web.live_api import configure
from tests.conftest import SECRET, add_submissions, app_client, make_settings
from tests.e2e.live_servers import Stream, read_sse, serve
from tests.e2e.pgbouncer import PgBouncer
from tests.e2e.servers import AppProcess, Faults, MarkingFunction, drain, free_port, run_asgi

pytestmark = pytest.mark.e2e
AUTH = {"authorization": f"Bearer {SECRET}"}
JOBS = 30


@pytest.fixture
def pooler(db_url: str) -> Iterator[PgBouncer]:
    bouncer = PgBouncer(db_url)
    bouncer.start()
    yield bouncer
    bouncer.stop()


def _events_url(base: str, assignment_id: str) -> str:
    return f"{base}/api/marking/events?assignment_id={assignment_id}"


def _completed(stream: Stream) -> set[str]:
    return {e["data"]["queue_id"] for e in stream.events if e["data"]["status"] == "completed"}


async def _watch_and_enqueue(base: str, assignment_id: str, ids: list[str]) -> Stream:
    """Open a live stream, enqueue, and read until every row was reported completed."""
    opened = asyncio.Event()
    reader = asyncio.create_task(read_sse(
        _events_url(base, assignment_id), headers=AUTH, opened=opened, timeout=60,
        until=lambda s: len(_completed(s)) >= len(ids)))
    await asyncio.wait_for(opened.wait(), 15)
    async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=30) as client:
        r = await client.post("/api/marking/enqueue", json={
            "assignment_id": assignment_id, "submission_ids": ids})
        assert r.status_code == 202, r.text
        assert r.json()["enqueued"] == len(ids)
    return await reader


async def _pages(base: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        r = await client.post("/ai-queue/login", data={"password": SECRET, "next": "/ai-queue"})
        assert r.status_code == 303, r.text
        page = await client.get("/ai-queue")
        assert page.status_code == 200 and "csrf_token" in page.text
        rows = await client.get("/ai-queue", params={"status": "completed"})
        assert rows.status_code == 200


# A PgBouncer before 1.21 (as here) keeps no prepared statements: `auto` must see
# the pooler and leave them off, as `off` does.
@pytest.mark.parametrize("prepared", ["auto", "off"])
async def test_the_chain_pages_and_live_events_through_pgbouncer_transaction_mode(
    db_url: str, conn: asyncpg.Connection, pooler: PgBouncer, prepared: str
) -> None:
    database = urlsplit(db_url).path.lstrip("/")
    fn = MarkingFunction(Faults(work_seconds=(0.01, 0.03)), cap=2)
    fn_port = free_port()
    env = {
        "DATABASE_URL": pooler.dsn(database),
        "DATABASE_DIRECT_URL": db_url,
        "MARKING_QUEUE_SECRET": SECRET,
        "AI_MARKING_FUNCTION_URL": f"http://127.0.0.1:{fn_port}/mark",
        "QUEUE_MAX_IN_FLIGHT": "2",
        "QUEUE_RETRY_BASE_SECONDS": "0",
        "DATABASE_POOL_MAX": "3",
        "DATABASE_PREPARED_STATEMENTS": prepared,
    }
    listened = [str(i) for i in await add_submissions(conn, JOBS, "hw-listen")]
    polled = [str(i) for i in await add_submissions(conn, 10, "hw-poll")]
    app = AppProcess(env, free_port())
    with run_asgi(fn.app, fn_port):
        app.start()
        try:
            stream = await _watch_and_enqueue(app.url, "hw-listen", listened)
            await drain(conn)
            await _pages(app.url)
        finally:
            app.stop()
        # The polling fallback: no direct URL, so no LISTEN; everything via the pooler.
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        settings = make_settings(
            pooler.dsn(database), database_direct_url=None, app_base_url=base,
            callback_url=f"{base}/webhooks/ai-mark", function_url=f"http://127.0.0.1:{fn_port}/mark",
            max_in_flight=2, database_prepared_statements=prepared)
        polling_app = create_app(settings)
        configure(polling_app, LiveConfig(max_seconds=60, heartbeat_seconds=5, poll_seconds=0.3))
        with serve(polling_app, port):
            polled_stream = await _watch_and_enqueue(base, "hw-poll", polled)
            assert not polling_app.state.aiqueue.hub.listening
            await drain(conn)
    assert _completed(stream) == set(await _queue_ids(conn, "hw-listen"))
    assert _completed(polled_stream) == set(await _queue_ids(conn, "hw-poll"))
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE status <> 'completed'") == 0
    # Each result applied once, within the cap.
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_attempts WHERE outcome = 'completed'") == JOBS + 10
    assert fn.record.max_in_flight <= 2 and not fn.record.over_cap
    # The pooled traffic really went through PgBouncer.
    assert f"login attempt: db={database}" in pooler.log_text()


async def _queue_ids(conn: asyncpg.Connection, assignment_id: str) -> list[str]:
    rows = await conn.fetch("SELECT queue_id FROM ai_marking_queue WHERE assignment_id = $1",
                            assignment_id)
    return [str(r["queue_id"]) for r in rows]


async def _four_backends(dsn: str) -> None:
    """Make the pooler open four server connections now (four transactions at once), so
    that round robin hands each next transaction another backend from the first on."""
    clients = [await asyncpg.connect(dsn, statement_cache_size=0) for _ in range(4)]
    try:
        held = [c.transaction() for c in clients]
        for tx in held:
            await tx.start()
        pids = {await c.fetchval("SELECT pg_backend_pid()") for c in clients}
        assert len(pids) == 4, pids
        for tx in held:
            await tx.rollback()
    finally:
        for c in clients:
            await c.close()


def _free_address(port: int) -> str:
    """A loopback address whose `port` is free: the pooler listens there on the server's
    own port number, so the URL's port and the server's agree (auto's port check passes)."""
    for last in range(2, 250):
        address = f"127.0.{last}.{last}"
        with socket.socket() as probe:
            try:
                probe.bind((address, port))
            except OSError:
                continue
            return address
    pytest.skip(f"no loopback address with port {port} free")


async def test_a_pooler_on_the_databases_own_port_turns_prepared_statements_off_once(
    db_url: str, conn: asyncpg.Connection, function: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="aiqueue")
    port = int(await conn.fetchval("SELECT current_setting('port')"))
    # Round robin: each transaction (and each prepare, outside one) may reach another
    # backend, so a statement prepared on one is soon missing on the next.
    bouncer = PgBouncer(db_url, address=_free_address(port), port=port,
                        settings="server_round_robin = 1\nmin_pool_size = 4\n")
    bouncer.start()
    try:
        database = urlsplit(db_url).path.lstrip("/")
        await _four_backends(bouncer.dsn(database))
        settings = make_settings(bouncer.dsn(database), database_direct_url=db_url,
                                 database_prepared_statements="auto", max_in_flight=0)
        ids = [str(i) for i in await add_submissions(conn, 5, "hw-prep")]
        app = create_app(settings)
        async with app_client(app) as client:
            answers = [await client.get("/api/marking/stats", headers=AUTH)]
            answers.append(await client.post("/api/marking/enqueue", headers=AUTH, json={
                "assignment_id": "hw-prep", "submission_ids": ids}))
            for _ in range(10):
                answers.append(await client.get("/api/marking/queue?assignment_id=hw-prep",
                                                headers=AUTH))
                answers.append(await client.get("/api/marking/stats", headers=AUTH))
            # Every request answered as if nothing happened.
            assert [r.status_code for r in answers if r.status_code >= 300] == [], [
                r.text for r in answers if r.status_code >= 300][:2]
            rt = await app.state.aiqueue.get()
            choice = rt.store.prepared_statements()
            assert choice == prepared.LOST
            doc = Doctor(settings, rt)
            await check_pooler(doc)
            line = next(c for c in doc.report.checks if c.name == "pooler")
            assert "prepared statements off (auto: turned off after a connection reported" \
                in line.detail
        # Through the pooler indeed, where it sat on the server's own port number.
        assert f"login attempt: db={database}" in bouncer.log_text()
    finally:
        bouncer.stop()
    logged = [json.loads(r.getMessage()) for r in caplog.records if r.name == "aiqueue"]
    assert [e for e in logged if e.get("outcome") == "prepared_off"] == [
        {"ts": ANY, "event": "database", "outcome": "prepared_off"}]
    # The enqueue ran once: no row twice.
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE assignment_id = 'hw-prep'") == 5
