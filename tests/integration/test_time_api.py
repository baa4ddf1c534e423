"""docs/operating/alerts.md through the real app and a real PostgreSQL: the enqueue's time fields,
and where scheduled and expired rows show."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.web.app import create_app
from tests.conftest import AUTH, add_submissions, app_client, make_settings


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    # Paused: nothing is dispatched, the rows stay pending for the assertions.
    app = create_app(make_settings(db_url, function_url="http://127.0.0.1:9/unreachable"))
    async with app_client(app) as c:
        yield c


@pytest.fixture(autouse=True)
async def paused(conn: asyncpg.Connection) -> None:
    await conn.execute("UPDATE ai_queue_control SET paused = true")


async def enqueue(client: httpx.AsyncClient, ids: list[uuid.UUID], **extra: Any
                  ) -> httpx.Response:
    body = {"assignment_id": "hw-9", "submission_ids": [str(i) for i in ids], **extra}
    return await client.post("/api/marking/enqueue", json=body, headers=AUTH)


@pytest.mark.parametrize(("extra", "field"), [
    ({"not_before": "2030-01-01T00:00:00Z", "delay_seconds": 5}, "not_before or delay_seconds"),
    ({"expires_at": "2030-01-01T00:00:00Z", "expire_after_seconds": 5}, "expires_at or"),
    ({"delay_seconds": -1}, "delay_seconds"),
    ({"delay_seconds": 2_592_001}, "delay_seconds"),
    ({"delay_seconds": "10"}, "delay_seconds"),
    ({"not_before": "tomorrow"}, "not_before"),
    ({"not_before": "2030-01-01T17:00:00"}, "not_before"),  # no offset: ambiguous
    ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
    ({"expire_after_seconds": 0}, "expire_after_seconds"),
    ({"delay_seconds": 60, "expire_after_seconds": 30}, "expires_at must be after not_before"),
])
async def test_bad_time_fields_are_422_naming_the_field_and_enqueue_nothing(
        client: httpx.AsyncClient, conn: asyncpg.Connection, extra: dict[str, Any], field: str):
    ids = await add_submissions(conn, 1)
    r = await enqueue(client, ids, **extra)
    assert r.status_code == 422, r.text
    assert field in r.json()["detail"]
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0


async def test_a_scheduled_enqueue_shows_as_scheduled_everywhere(
        client: httpx.AsyncClient, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 2, "hw-9")
    # Five days on at 17:00 in a zone one hour ahead of UTC: 16:00 UTC.
    day = (datetime.now(UTC) + timedelta(days=5)).date()
    at = f"{day.isoformat()}T17:00:00+01:00"
    utc = datetime(day.year, day.month, day.day, 16, tzinfo=UTC)
    r = await enqueue(client, ids[:1], not_before=at)
    assert r.status_code == 202 and r.json()["enqueued"] == 1
    r = await enqueue(client, ids[1:], delay_seconds=3600, expire_after_seconds=7200)
    assert r.status_code == 202
    rows = await conn.fetch("SELECT submission_id, not_before, run_after, expires_at "
                            "FROM ai_marking_queue")
    by_id = {r["submission_id"]: r for r in rows}
    assert by_id[ids[0]]["not_before"] == utc
    assert by_id[ids[0]]["run_after"] == by_id[ids[0]]["not_before"]
    delayed = by_id[ids[1]]
    assert delayed["expires_at"] - delayed["not_before"] == timedelta(hours=1)

    items = (await client.get("/api/marking/queue?assignment_id=hw-9", headers=AUTH)).json()
    assert {i["not_before"] for i in items["items"]} >= {utc.isoformat()}
    stats = (await client.get("/api/marking/stats", headers=AUTH)).json()
    assert (stats["pending"], stats["scheduled"], stats["oldest_pending_seconds"]) == (2, 2, None)
    assert stats["expired"] == 0 and stats["alerts"] == []
    progress = (await client.get("/api/marking/assignments/hw-9/progress", headers=AUTH)).json()
    assert progress["scheduled"] == 2 and progress["expired"] == 0
    assert progress["scheduled_for"] is not None
    status = (await client.get(f"/api/marking/submissions/{ids[0]}/status",
                               headers=AUTH)).json()
    assert status["scheduled_for"] == utc.isoformat()
    # The status filter knows the new state.
    r = await client.get("/api/marking/queue?status=expired", headers=AUTH)
    assert r.status_code == 200 and r.json()["total"] == 0
