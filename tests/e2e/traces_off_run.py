"""A whole marking run with tracing off, in a process of its own; prints what it imported.

`python -m tests.e2e.traces_off_run <database url>`: the app and the reference function
on loopback, three rows enqueued, marked and applied; then one JSON line: the rows'
statuses and every loaded module whose name starts with `opentelemetry`
(tests/e2e/test_traces.py expects none).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import asyncpg
import httpx

from aiqueue.settings import load_settings
from aiqueue.web.app import create_app
from functions.ai_mark.server import create_app as function_app
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.conftest import AUTH, SECRET, add_submissions
from tests.e2e.servers import free_port, run_asgi


async def run(db_url: str) -> dict[str, object]:
    app_port, fn_port = free_port(), free_port()
    settings = load_settings({
        "DATABASE_URL": db_url, "MARKING_QUEUE_SECRET": SECRET,
        "AI_MARKING_FUNCTION_URL": f"http://127.0.0.1:{fn_port}/",
        "APP_BASE_URL": f"http://127.0.0.1:{app_port}"}, dev=True)
    conn = await asyncpg.connect(db_url)
    try:
        ids = await add_submissions(conn, 3, "hw-off")
        with run_asgi(function_app(FunctionSettings(simulate_latency=0)), fn_port), \
                run_asgi(create_app(settings), app_port):
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app_port}") as client:
                r = await client.post("/api/marking/enqueue", headers=AUTH, json={
                    "assignment_id": "hw-off", "submission_ids": [str(i) for i in ids],
                    "payload": {"rubric": "r", "max_score": 1}})
                assert r.status_code == 202, r.text
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and await conn.fetchval(
                    "SELECT count(*) FROM ai_marking_queue WHERE status <> 'completed'"):
                await asyncio.sleep(0.05)
        statuses = [r["status"] for r in await conn.fetch("SELECT status FROM ai_marking_queue")]
        kept = await conn.fetchval("SELECT count(*) FROM ai_marking_traces")
    finally:
        await conn.close()
    return {"statuses": statuses, "traces_kept": kept,
            "otel_modules": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(sys.argv[1]))))
