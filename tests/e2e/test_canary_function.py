"""A drift canary end to end (docs/canaries.md): the app and the reference marking function
on loopback, every dispatch and callback over HTTP, the in-process ticker running."""

from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack

import asyncpg
import httpx

from aiqueue.dev import demo
from aiqueue.settings.canary import Canary
from aiqueue.settings.kinds import Kind, Pool, QueueConfig
from functions.ai_mark.probe import FUNCTION_VERSION
from functions.ai_mark.server import create_app as function_app
from tests.conftest import AUTH
from tests.e2e.browser import QUICK, seed_demo, teacher_app
from tests.e2e.live_servers import serve
from tests.e2e.servers import free_port

N = len(demo.ANSWERS)


async def until(conn: asyncpg.Connection, sql: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not await conn.fetchval(sql):
        assert time.time() < deadline, f"timed out waiting for: {sql}"
        await asyncio.sleep(0.1)


async def test_a_canary_re_marks_reviewed_answers_through_the_real_function(
        db_url: str, conn: asyncpg.Connection) -> None:
    await seed_demo(db_url)
    port, fn_port = free_port(), free_port()
    kind = Kind(name="mark", pool="default", function_url=f"http://127.0.0.1:{fn_port}/",
                canary=Canary(rows=6))
    app = teacher_app(db_url, port, fn_port=fn_port, max_in_flight=4, queue_file=QueueConfig(
        {"default": Pool(name="default", max_in_flight=4)}, {"mark": kind}))
    base = f"http://127.0.0.1:{port}"
    with ExitStack() as servers:
        servers.enter_context(serve(function_app(QUICK), fn_port))
        servers.enter_context(serve(app, port))
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            ids = [str(demo.submission_id(i)) for i in range(N)]
            r = await client.post("/api/marking/enqueue", headers=AUTH, json={
                "assignment_id": demo.ASSIGNMENT_ID, "submission_ids": ids,
                "payload": demo.payload()})
            assert r.status_code == 202, r.text
            await until(conn, f"SELECT count(*) = {N} FROM ai_marking_queue "
                              "WHERE status = 'completed'")
            # Each result records who made it: the function's provider and version.
            made = await conn.fetch("SELECT DISTINCT provider, function_version "
                                    "FROM ai_marking_results")
            assert [tuple(m) for m in made] == [("simulate", FUNCTION_VERSION)]
            # The teacher accepts every mark as it is.
            for qid in await conn.fetch("SELECT queue_id FROM ai_marking_queue"):
                r = await client.post(f"/api/marking/queue/{qid['queue_id']}/accept",
                                      headers=AUTH)
                assert r.status_code == 200, r.text
            marks = await conn.fetch("SELECT id, ai_result::text FROM submissions ORDER BY id")
            r = await client.post("/api/marking/canary/mark/run", headers=AUTH)
            assert r.status_code == 202 and r.json()["rows"] == 6
            await until(conn, "SELECT EXISTS (SELECT 1 FROM ai_marking_canary_runs "
                              "WHERE state = 'finished' AND trigger = 'manual')")
            r = await client.get("/api/marking/canary?kind=mark", headers=AUTH)
            run = next(i for i in r.json()["items"] if i["trigger"] == "manual")
    # The same function and payload re-mark the same answers alike: it passes.
    assert run["answered"] == 6 and run["passed"] is True and run["exact"] == 1.0
    assert run["model"] == "simulator" and run["function_version"] == FUNCTION_VERSION
    assert await conn.fetch("SELECT id, ai_result::text FROM submissions ORDER BY id") == marks
    assert await conn.fetchval("SELECT count(*) FROM ai_queue_alerts WHERE alert = 'drift'") == 0
