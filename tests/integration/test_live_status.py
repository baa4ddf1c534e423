"""Status, progress and cancel endpoints through the real app on a real PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.db.store import Store
from aiqueue.models import Completed
from aiqueue.web.app import create_app
from tests.conftest import SECRET, add_submissions, make_settings
from tests.plans import plan_of

AUTH = {"authorization": f"Bearer {SECRET}"}
THRESHOLD = 5


@pytest.fixture
async def client(db_url: str, conn: asyncpg.Connection) -> AsyncIterator[httpx.AsyncClient]:
    # Paused: enqueue's kick claims nothing, so rows move only when a test moves them.
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    app = create_app(make_settings(db_url, max_in_flight=2))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://app.test") as c:
        yield c
    await app.state.aiqueue.close()


async def enqueue(client: httpx.AsyncClient, ids: list[uuid.UUID], assignment: str = "hw-1",
                  **extra: Any) -> list[str]:
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": assignment, "submission_ids": [str(i) for i in ids], **extra})
    assert r.status_code == 202, r.text
    queue_ids: list[str] = r.json()["queue_ids"]
    return queue_ids


async def status(client: httpx.AsyncClient, submission_id: uuid.UUID) -> dict[str, Any]:
    r = await client.get(f"/api/marking/submissions/{submission_id}/status", headers=AUTH)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def claim(store: Store, conn: asyncpg.Connection) -> Any:
    await conn.execute("UPDATE ai_queue_control SET paused = false")
    job = await store.claim(plan_of(0, THRESHOLD))
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    assert job is not None
    return job


async def test_queue_position_follows_claim_order(
    client: httpx.AsyncClient, conn: asyncpg.Connection, store: Store
):
    ids = await add_submissions(conn, 4)
    await enqueue(client, ids[:3])
    assert [(await status(client, i))["queue_position"] for i in ids[:3]] == [1, 2, 3]
    await enqueue(client, ids[3:], priority=5)
    assert [(await status(client, i))["queue_position"] for i in ids] == [2, 3, 4, 1]
    job = await claim(store, conn)
    assert job.submission_id == ids[3]
    st = await status(client, ids[3])
    assert st["status"] == "processing" and st["queue_position"] == 0 and st["attempts"] == 1
    assert [(await status(client, i))["queue_position"] for i in ids[:3]] == [1, 2, 3]
    assert await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                                plan_of())
    done = await status(client, ids[3])
    assert done["status"] == "completed" and done["queue_position"] is None
    assert done["estimated_wait_seconds"] is None


async def test_a_row_waiting_for_its_retry_is_behind_the_rows_due_before_it(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 3)
    queue_ids = await enqueue(client, ids)
    await conn.execute("UPDATE ai_marking_queue SET run_after = now() + interval '1 hour' "
                       "WHERE queue_id = $1", uuid.UUID(queue_ids[0]))
    assert [(await status(client, i))["queue_position"] for i in ids] == [3, 1, 2]


async def test_wait_estimate_uses_recent_processing_time_and_the_cap(
    client: httpx.AsyncClient, conn: asyncpg.Connection, store: Store
):
    ids = await add_submissions(conn, 6)
    await enqueue(client, ids)
    assert (await status(client, ids[0]))["estimated_wait_seconds"] is None  # no history yet
    job = await claim(store, conn)
    await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None), plan_of())
    # The one finished row took 10 s from dispatch to result.
    await conn.execute("UPDATE ai_marking_queue SET started_at = finished_at - interval '10 s' "
                       "WHERE queue_id = $1", job.queue_id)
    running = await claim(store, conn)
    await conn.execute("UPDATE ai_marking_queue SET started_at = now() - interval '4 s' "
                       "WHERE queue_id = $1", running.queue_id)
    # Cap 2, one in flight: positions 1..4 wait 1, 2, 2, 3 rounds of 10 s.
    waits = [(await status(client, i)) for i in ids[2:]]
    assert [w["queue_position"] for w in waits] == [1, 2, 3, 4]
    assert [w["estimated_wait_seconds"] for w in waits] == [10.0, 20.0, 20.0, 30.0]
    now_running = await status(client, ids[1])
    assert now_running["queue_position"] == 0
    assert 5.0 <= now_running["estimated_wait_seconds"] <= 6.1


async def test_status_of_an_unknown_submission_is_404_and_needs_the_secret(
    client: httpx.AsyncClient,
):
    r = await client.get(f"/api/marking/submissions/{uuid.uuid4()}/status", headers=AUTH)
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    assert (await client.get("/api/marking/submissions/not-a-uuid/status",
                             headers=AUTH)).status_code == 404
    assert (await client.get(f"/api/marking/submissions/{uuid.uuid4()}/status")).status_code == 401


async def test_progress_counts_the_latest_run_and_late_rows_join_it(
    client: httpx.AsyncClient, conn: asyncpg.Connection, store: Store
):
    ids = await add_submissions(conn, 6)
    empty = (await client.get("/api/marking/assignments/hw-1/progress", headers=AUTH)).json()
    assert empty["total"] == 0 and empty["estimated_remaining_seconds"] == 0.0
    await enqueue(client, ids[:2])
    for _ in range(2):
        job = await claim(store, conn)
        await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                             plan_of())
    done = (await client.get("/api/marking/assignments/hw-1/progress", headers=AUTH)).json()
    assert (done["total"], done["completed"], done["estimated_remaining_seconds"]) == (2, 2, 0.0)
    await conn.execute("UPDATE ai_marking_queue SET started_at = finished_at - interval '10 s'")
    # A new run: the first one had finished.
    await enqueue(client, ids[2:4])
    await claim(store, conn)
    await enqueue(client, ids[4:5])  # joins the live run
    await enqueue(client, ids[5:], assignment="hw-other")
    p = (await client.get("/api/marking/assignments/hw-1/progress", headers=AUTH)).json()
    assert {k: p[k] for k in ("total", "pending", "processing", "completed", "failed",
                              "cancelled")} == {
        "total": 3, "pending": 2, "processing": 1, "completed": 0, "failed": 0, "cancelled": 0}
    # Cap 2 with one slot taken: the run's last pending row is the second ahead,
    # so two rounds of the recent 10 s.
    assert p["estimated_remaining_seconds"] == 20.0


async def test_cancel_stops_the_pending_rest_and_leaves_rows_in_flight(
    client: httpx.AsyncClient, conn: asyncpg.Connection, store: Store
):
    ids = await add_submissions(conn, 4)
    await enqueue(client, ids)
    job = await claim(store, conn)
    assert (await client.post("/api/marking/assignments/hw-1/cancel")).status_code == 401
    r = await client.post("/api/marking/assignments/hw-1/cancel", headers=AUTH)
    assert r.status_code == 200 and r.json() == {"cancelled": 3}
    again = await client.post("/api/marking/assignments/hw-1/cancel", headers=AUTH)
    assert again.json() == {"cancelled": 0}
    p = (await client.get("/api/marking/assignments/hw-1/progress", headers=AUTH)).json()
    assert (p["total"], p["processing"], p["cancelled"]) == (4, 1, 3)
    assert (await status(client, job.submission_id))["status"] == "processing"
    assert (await status(client, ids[1]))["queue_position"] is None
    events = await conn.fetchval(
        "SELECT count(*) FROM ai_marking_events WHERE assignment_id = 'hw-1' "
        "AND status = 'cancelled'")
    assert events == 3
    history = await conn.fetchval(
        "SELECT count(*) FROM ai_marking_attempts WHERE outcome = 'cancel' AND actor = 'api'")
    assert history == 3
