"""The teacher's "Mark at …" and what /ai-queue shows of time, through the app."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx

from aiqueue.db.store import Store, connect_pool
from aiqueue.dev import demo
from tests.integration.page_kit import JSON, PAGE, app_client, login

__all__ = ["app_client"]  # the fixture (tests/integration/page_kit.py)


async def test_mark_at_schedules_the_class_and_the_page_says_so(
        app_client: httpx.AsyncClient, conn: asyncpg.Connection):
    csrf = await login(app_client)
    page = (await app_client.get(PAGE)).text
    assert 'type="datetime-local"' in page and "Mark at …" in page
    # What the page's script sends: the picked local time, as UTC RFC 3339.
    at = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    r = await app_client.post(f"{PAGE}/mark", headers=JSON, data={
        "csrf_token": csrf, "not_before": at.isoformat().replace("+00:00", "Z")})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["enqueued"] == len(demo.ANSWERS) and body["not_before"] == at.isoformat()
    assert set(await conn.fetchval("SELECT array_agg(DISTINCT not_before) FROM ai_marking_queue")
               ) == {at}
    progress = (await app_client.get(f"{PAGE}/progress", headers=JSON)).json()
    assert f"scheduled for {at:%Y-%m-%d %H:%M} UTC" in progress["text"]
    monitor = (await app_client.get("/ai-queue")).text
    assert monitor.count("data-scheduled") >= 1 and "scheduled for" in monitor


async def test_mark_at_without_a_time_is_refused_and_enqueues_nothing(
        app_client: httpx.AsyncClient, conn: asyncpg.Connection):
    csrf = await login(app_client)
    for bad in ("", "next friday", "2026-11-27T17:00"):
        r = await app_client.post(f"{PAGE}/mark", headers=JSON,
                                  data={"csrf_token": csrf, "not_before": bad})
        assert r.status_code == 422, bad
        assert "not_before" in r.json()["detail"] or "date and time" in r.json()["detail"]
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0


async def test_ai_queue_shows_the_open_alerts(
        app_client: httpx.AsyncClient, conn: asyncpg.Connection, db_url: str):
    await login(app_client)
    assert "data-alert" not in (await app_client.get("/ai-queue")).text
    ids = [demo.submission_id(0)]
    store = Store(await connect_pool(db_url, max_size=2))
    try:
        await store.enqueue(ids, demo.ASSIGNMENT_ID, 0, {})
        changes = await store.evaluate_alerts(backlog=1, stalled=10**9, failures_min=10**9,
                                              failure_rate=1.0,
                                              at=datetime.now(UTC) + timedelta(minutes=5))
    finally:
        await store.close()
    assert changes == [("backlog_age", "opened")]
    page = (await app_client.get("/ai-queue")).text
    [banner] = re.findall(r'data-alert><span class="grow">([^<]*)<', page)
    assert "backlog_age" in banner and "pool default" in banner
