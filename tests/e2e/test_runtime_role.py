"""`python -m aiqueue serve` logging in as the least-privilege runtime role.

The owner migrates with `--runtime-role`; `serve` then runs with DATABASE_URL
logging in as that role, applies no migration (it can't) and serves the whole
chain: the teacher page's Mark All and the enqueue API, signed dispatches to the
reference function, callbacks, the live events over LISTEN, the /ai-queue page
and the JSON twins.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import uuid
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from functions.ai_mark.server import create_app as function_app
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.conftest import SECRET, add_submissions
from tests.e2e.live_servers import read_sse, serve
from tests.e2e.servers import AppProcess, drain, free_port
from tests.roles import RuntimeDb, runtime_database

pytestmark = pytest.mark.e2e
AUTH = {"authorization": f"Bearer {SECRET}"}
SIGNING = "whsec_" + base64.b64encode(b"e2e-signing-key-0123456789abcdef").decode()
RUBRIC = {"rubric": "Names light; Names water; Names oxygen", "max_score": 6}


@pytest.fixture
async def db(pg_admin: str) -> AsyncIterator[RuntimeDb]:
    async with runtime_database(pg_admin) as made:
        yield made


async def test_the_app_runs_everything_as_the_runtime_role(db: RuntimeDb) -> None:
    owner = await asyncpg.connect(db.owner_dsn)
    fn_port, app_port = free_port(), free_port()
    fn = function_app(FunctionSettings(simulate_latency=0.01, callback_backoff=0.05,
                                       signing_secret=SIGNING))
    app = AppProcess({
        "DATABASE_URL": db.runtime_dsn,
        "MARKING_QUEUE_SECRET": SECRET,
        "AI_MARKING_FUNCTION_URL": f"http://127.0.0.1:{fn_port}/mark",
        "AI_MARKING_SIGNING_SECRET": SIGNING,
        "QUEUE_MAX_IN_FLIGHT": "2",
        "QUEUE_RETRY_BASE_SECONDS": "0",
    }, app_port)
    try:
        page_subs = await add_submissions(owner, 3, "hw-rt", content="light water oxygen")
        api_subs = await add_submissions(owner, 3, "hw-rt-api", content="light water")
        # The host's side of the teacher page: an assignment with its rubric.
        await owner.execute("INSERT INTO ai_marking_assignments (assignment_id, title, payload)"
                            " VALUES ('hw-rt', 'Photosynthesis', $1::jsonb)", json.dumps(RUBRIC))
        with serve(fn, fn_port):
            app.start()
            try:
                assert '"migrate_skipped"' in app.output() and "not_owner" in app.output()
                await run_the_chain(app.url, db, owner, page_subs, api_subs)
            finally:
                app.stop()
        assert await owner.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE status = 'completed'") == 6
        assert await owner.fetchval(
            "SELECT count(*) FROM submissions WHERE ai_result IS NOT NULL") == 6
        # Every dispatch was signed (the function refuses unsigned ones) and accepted once.
        assert await owner.fetchval(
            "SELECT count(*) FROM ai_marking_attempts WHERE outcome = 'completed'") == 6
        assert "ERROR" not in app.output() and "permission denied" not in app.output()
    finally:
        await owner.close()


async def run_the_chain(base: str, db: RuntimeDb, owner: asyncpg.Connection,
                        page_subs: list[uuid.UUID], api_subs: list[uuid.UUID]) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=20) as client:
        opened = asyncio.Event()
        reader = asyncio.create_task(read_sse(
            f"{base}/api/marking/events?assignment_id=hw-rt", headers=AUTH, opened=opened,
            until=lambda s: sum(e["data"]["status"] == "completed" for e in s.events) == 3))
        await asyncio.wait_for(opened.wait(), 10)
        # The stream's LISTEN session runs as the runtime role and announces itself.
        assert await owner.fetchval("SELECT listened_until > now() FROM ai_queue_control")
        assert await owner.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", db.role) >= 1

        r = await client.post("/ai-queue/login", data={"password": SECRET,
                                                       "next": "/results/assignments/hw-rt"})
        assert r.status_code == 303
        page = await client.get("/results/assignments/hw-rt")
        assert page.status_code == 200 and page.text.count("<tr data-submission=") == 3
        match = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert match
        r = await client.post("/results/assignments/hw-rt/mark", data={"csrf_token": match[1]},
                              headers={"accept": "application/json"})
        assert r.status_code in (200, 202), r.text
        r = await client.post("/api/marking/enqueue", headers=AUTH, json={
            "assignment_id": "hw-rt-api", "submission_ids": [str(s) for s in api_subs],
            "payload": RUBRIC})
        assert r.status_code == 202 and r.json()["enqueued"] == 3, r.text

        stream = await reader
        assert stream.status_code == 200
        done = {e["data"]["submission_id"] for e in stream.events
                if e["data"]["status"] == "completed"}
        assert done == {str(s) for s in page_subs}
        await drain(owner, timeout=30)

        assert (await client.get("/ai-queue")).status_code == 200
        assert "hw-rt" in (await client.get("/ai-queue")).text
        stats = (await client.get("/api/marking/stats", headers=AUTH)).json()
        assert stats["completed"] == 6 and stats["failed"] == 0
        rows = (await client.get("/api/marking/queue?status=completed", headers=AUTH)).json()
        assert rows["total"] == 6
        assert (await client.get("/metrics", headers=AUTH)).status_code == 200
        assert (await client.get("/healthz")).status_code == 200
