"""End to end: `python -m aiqueue serve` + a real function server on loopback."""

from __future__ import annotations

import asyncpg
import httpx
import pytest

from tests.conftest import SECRET, add_submissions
from tests.e2e.servers import AppProcess, Faults, MarkingFunction, drain, free_port, run_asgi
from tests.prom import value

# Timed end to end: one after another on one worker, never two of them at once.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("timed")]


@pytest.mark.parametrize("cap", [1, 4])
async def test_200_submissions_are_each_marked_once_within_the_cap(
    db_url: str, conn: asyncpg.Connection, cap: int
):
    fn = MarkingFunction(Faults(work_seconds=(0.02, 0.06)))
    fn_port, app_port = free_port(), free_port()
    app = AppProcess({
        "DATABASE_URL": db_url,
        "MARKING_QUEUE_SECRET": SECRET,
        "AI_MARKING_FUNCTION_URL": f"http://127.0.0.1:{fn_port}/mark",
        "QUEUE_MAX_IN_FLIGHT": str(cap),
        "QUEUE_RETRY_BASE_SECONDS": "0",
    }, app_port)
    ids = await add_submissions(conn, 200, "hw-e2e")
    with run_asgi(fn.app, fn_port):
        app.start()
        try:
            async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
                auth = {"authorization": f"Bearer {SECRET}"}
                denied = await client.post("/api/marking/enqueue", json={}, headers={
                    "authorization": "Bearer wrong-secret-0123456789"})
                assert denied.status_code == 401
                r = await client.post("/api/marking/enqueue", headers=auth, json={
                    "assignment_id": "hw-e2e", "submission_ids": [str(i) for i in ids],
                    "payload": {"rubric": "r", "max_score": 10}})
                assert r.status_code == 202, r.text
                assert r.json()["enqueued"] == 200
                await drain(conn)
                stats = (await client.get("/api/marking/stats", headers=auth)).json()
                usage = (await client.get("/api/marking/usage?by=model", headers=auth)).json()
                metrics = (await client.get("/metrics", headers=auth)).text
        finally:
            app.stop()
    assert stats["completed"] == 200 and stats["failed"] == 0
    rows = await conn.fetch("SELECT status, attempts FROM ai_marking_queue")
    assert {r["status"] for r in rows} == {"completed"}
    assert await conn.fetchval(
        "SELECT count(*) FROM submissions WHERE ai_result IS NOT NULL") == 200
    # Each result applied once: one completed history entry per row.
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_attempts WHERE outcome = 'completed'") == 200
    assert fn.record.max_in_flight <= cap
    assert fn.record.max_in_flight == cap  # and the slots were actually used
    assert len(fn.record.seen_queue_ids) == 200
    # The function reported 10 prompt and 5 completion tokens per result (model
    # "test"): the webhook's usage reached the database, summed once per job.
    assert usage["items"] == [{**usage["total"], "key": "test"}]
    assert (usage["total"]["jobs"], usage["total"]["prompt_tokens"],
            usage["total"]["completion_tokens"]) == (200, 2000, 1000)
    assert usage["total"]["unpriced_jobs"] == 200 and usage["total"]["cost_usd"] is None
    assert value(metrics, "aiqueue_tokens_total", model="test", kind="prompt") == 2000
    assert value(metrics, "aiqueue_jobs_completed_total") == 200
