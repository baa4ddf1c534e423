"""The safety net when the chain is broken (APP_BASE_URL points at nothing).

Every job's first attempt fails, so every row waits for a delayed retry and
the result-driven steps find nothing due: only the in-process ticker (or a
status read) can get them going again.
"""

from __future__ import annotations

import asyncio
import json
import time

import asyncpg
import httpx
import pytest

from tests.conftest import SECRET, add_submissions
from tests.e2e.servers import AppProcess, Faults, FunctionHost, MarkingFunction, free_port

pytestmark = pytest.mark.e2e
AUTH = {"authorization": f"Bearer {SECRET}"}


def broken_chain_app(db_url: str, function_url: str, **env: str) -> AppProcess:
    port = free_port()
    return AppProcess({
        "DATABASE_URL": db_url,
        "MARKING_QUEUE_SECRET": SECRET,
        "AI_MARKING_FUNCTION_URL": function_url,
        # The chain goes nowhere; results still reach this instance.
        "AI_MARKING_CALLBACK_URL": f"http://127.0.0.1:{port}/webhooks/ai-mark",
        "QUEUE_MAX_IN_FLIGHT": "3",
        **env,
    }, port, base_url=f"http://127.0.0.1:{free_port()}")


async def counts(conn: asyncpg.Connection) -> dict[str, int]:
    return dict(await conn.fetch("SELECT status, count(*) FROM ai_marking_queue GROUP BY status"))


async def wait_for(conn: asyncpg.Connection, sql: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await conn.fetchval(sql):
            return True
        await asyncio.sleep(0.1)
    return False


DRAINED = "SELECT count(*) = 0 FROM ai_marking_queue WHERE status IN ('pending', 'processing')"


async def test_the_ticker_completes_delayed_retries_without_a_chain(
    db_url: str, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 12, "hw-net")
    host = FunctionHost(MarkingFunction(Faults(fail_first_attempts=1)), free_port())
    host.up()
    app = broken_chain_app(db_url, host.url, QUEUE_RETRY_BASE_SECONDS="1",
                           QUEUE_TICK_SECONDS="0.5")
    try:
        await asyncio.to_thread(app.start)
        async with httpx.AsyncClient(base_url=app.url) as client:
            r = await client.post("/api/marking/enqueue", headers=AUTH, json={
                "assignment_id": "hw-net", "submission_ids": [str(i) for i in ids]})
            assert r.status_code == 202
        assert await wait_for(conn, DRAINED, 60), await counts(conn)
    finally:
        await asyncio.to_thread(app.stop)
        await asyncio.to_thread(host.close)
    rows = await conn.fetch("SELECT status, attempts FROM ai_marking_queue")
    assert {(r["status"], r["attempts"]) for r in rows} == {("completed", 2)}
    events = [json.loads(line) for line in app.output().splitlines() if line.startswith("{")]
    assert any(e.get("event") == "chain" and e.get("chained") is False for e in events), \
        "the chain really was broken"


async def test_a_status_read_restarts_a_stalled_queue_when_nothing_else_would(
    db_url: str, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 6, "hw-stall")
    host = FunctionHost(MarkingFunction(Faults(fail_first_attempts=1)), free_port())
    host.up()
    # No ticker, no cron: after the first attempts fail, nothing is left to run a step.
    # The retries wait 2.4 s or more: the six first attempts fail before any retry is
    # due, even on a busy machine (a step that ends one would find it due).
    app = broken_chain_app(db_url, host.url, QUEUE_RETRY_BASE_SECONDS="3",
                           QUEUE_TICK_SECONDS="0")
    try:
        await asyncio.to_thread(app.start)
        async with httpx.AsyncClient(base_url=app.url) as client:
            r = await client.post("/api/marking/enqueue", headers=AUTH, json={
                "assignment_id": "hw-stall", "submission_ids": [str(i) for i in ids]})
            assert r.status_code == 202
            stalled = ("SELECT count(*) = 6 FROM ai_marking_queue WHERE status = 'pending'"
                       " AND attempts = 1 AND run_after < now() - interval '1 second'")
            assert await wait_for(conn, stalled, 30), await counts(conn)
            # Due for a while, nothing in flight, nobody kicking: it stays stalled…
            await asyncio.sleep(1.0)
            assert await counts(conn) == {"pending": 6}
            # …also through reads that are not authenticated status reads.
            assert (await client.get("/api/marking/stats")).status_code == 401
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.get("/metrics")).status_code == 401
            await asyncio.sleep(0.5)
            assert await counts(conn) == {"pending": 6}
            # An operator (or the teacher's page) looks: the queue moves again.
            assert (await client.get("/api/marking/stats", headers=AUTH)).status_code == 200
            assert await wait_for(conn, DRAINED, 30), await counts(conn)
    finally:
        await asyncio.to_thread(app.stop)
        await asyncio.to_thread(host.close)
    assert await counts(conn) == {"completed": 6}
    assert any(json.loads(line).get("event") == "kick" for line in app.output().splitlines()
               if line.startswith("{"))
