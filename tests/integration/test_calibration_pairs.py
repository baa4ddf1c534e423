"""The calibration gate together with spend caps, not_before and the batch lane (docs/agreement.md).

Each pair: the gate holds what it holds and fails nothing, and the other rule
still holds for every row, before and after the release.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.models.calibration import GateAsked
from aiqueue.queue.overnight import lane_times
from aiqueue.settings import ModelPrice
from aiqueue.settings.kinds import DEFAULT_POOL
from aiqueue.web.app import create_app
from tests.conftest import AUTH, add_submissions, app_client, enqueued, make_settings
from tests.integration.batch_kit import lane_rig
from tests.integration.calibration_kit import dispatched, drain, enqueue, statuses
from tests.plans import plan_of


@pytest.fixture
async def capped(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    # A budget smaller than one row: the first row goes, the rest wait for the next hour.
    app = create_app(make_settings(db_url, max_in_flight=10,
                                   model_prices={"gpt-4o-mini": ModelPrice(5.0, 15.0)},
                                   group_usd_per_hour=0.000001))
    async with app_client(app) as c:
        yield c


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings(db_url, max_in_flight=10))
    async with app_client(app) as c:
        yield c


async def waiting_for(client: httpx.AsyncClient) -> dict[str, int]:
    r = await client.get("/api/marking/queue?status=pending&limit=100", headers=AUTH)
    found: dict[str, int] = {}
    for item in r.json()["items"]:
        found[str(item["waiting_for"])] = found.get(str(item["waiting_for"]), 0) + 1
    return found


async def test_calibration_and_spend_caps(capped: httpx.AsyncClient, conn: asyncpg.Connection,
                                          function: Any) -> None:
    subs = await add_submissions(conn, 8, assignment_id="hw-7")
    body = {"assignment_id": "hw-7", "submission_ids": [str(s) for s in subs],
            "calibrate": {"rows": 3}, "dry_run": True}
    estimate = (await capped.post("/api/marking/enqueue", headers=AUTH, json=body)).json()
    # The dry run prices the calibration rows and the rest apart, and names the cap.
    assert estimate["calibration"]["rows"] == 3 and estimate["rest"]["rows"] == 5
    parts = estimate["calibration"]["estimated_cost_usd"] + estimate["rest"]["estimated_cost_usd"]
    assert estimate["estimated_cost_usd"] == pytest.approx(parts)
    assert estimate["capped"]["group_usd_per_hour"] == 0.000001

    answer = await enqueue(capped, subs, calibrate={"rows": 3})
    await drain(capped)
    # One calibration row went; the cap holds the other two; the gate holds the rest.
    assert len(dispatched(function)) == 1
    assert await waiting_for(capped) == {"spend_cap": 2, "calibration": 5}
    await capped.post(f"/api/marking/runs/{answer['run_id']}/release", headers=AUTH)
    await drain(capped)
    # Released, the rest are under the cap like any row: they wait, paused, never failed.
    assert len(dispatched(function)) == 1
    assert await waiting_for(capped) == {"spend_cap": 7}
    assert await statuses(conn) == {"processing": 1, "pending": 7}


async def test_calibration_and_not_before(client: httpx.AsyncClient, conn: asyncpg.Connection,
                                          function: Any) -> None:
    subs = await add_submissions(conn, 6, assignment_id="hw-7")
    # The enqueue's own step waits out so short a delay (hold.py), then dispatches.
    answer = await enqueue(client, subs, calibrate={"rows": 2}, delay_seconds=1.5)
    not_before = await conn.fetchval("SELECT max(not_before) FROM ai_marking_queue")
    # The held rows keep their own time for the release.
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                               "WHERE held_run_after = not_before") == 4
    await asyncio.sleep(max(0.0, (not_before - datetime.now(UTC)).total_seconds()) + 0.1)
    await drain(client)
    # Only the calibration rows went, and not before their time.
    assert function.call_count == 2
    first = await conn.fetchval("SELECT min(started_at) FROM ai_marking_attempts")
    assert first >= not_before
    await client.post(f"/api/marking/runs/{answer['run_id']}/release", headers=AUTH)
    await drain(client)
    assert function.call_count == 6

    # Released before its time, a run's rows still wait for not_before.
    later = await add_submissions(conn, 4, assignment_id="hw-9", content="late answer")
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-9", "submission_ids": [str(s) for s in later],
        "calibrate": {"rows": 1}, "delay_seconds": 600})
    run_9 = uuid.UUID(r.json()["run_id"])
    r = await client.post(f"/api/marking/runs/{run_9}/release", headers=AUTH)
    assert r.json()["released"] == 3
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue WHERE run_id = $1 "
                               "AND run_after = not_before AND not_before > now()", run_9) == 4
    await drain(client)
    assert function.call_count == 6


@pytest.mark.e2e
async def test_calibration_and_the_batch_lane(db_url: str, conn: asyncpg.Connection) -> None:
    async with lane_rig("openai", db_url, conn) as rig:
        ids = await add_submissions(conn, 10, "hw-b", content="photosynthesis")
        outcome = enqueued(await rig.rt.store.enqueue(
            ids, "hw-b", 0, {"rubric": "- names chlorophyll", "max_score": 10},
            batch=await lane_times(rig.rt, DEFAULT_POOL, None), gate=GateAsked(rows=3)))
        assert outcome.run_id is not None
        run_id = outcome.run_id
        lanes = dict(await conn.fetch("SELECT calibration, lane FROM ai_marking_queue "
                                      "GROUP BY 1, 2"))
        # The calibration rows go live (the teacher waits for them); the rest on the lane.
        assert lanes == {True: "live", False: "batch"}
        report = await rig.step()
        assert report.packed == 0  # nothing held is packed
        claimed = [await rig.rt.store.claim(plan_of(4, 5)) for _ in range(4)]
        assert len([c for c in claimed if c is not None]) == 3
        released = await rig.rt.store.calibration_release(run_id, "teacher")
        assert released.released == 7
        # Back on the lane with their own live time, and packed by the next step.
        assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue WHERE lane = 'batch' "
                                   "AND run_after > now() AND held_run_after IS NULL") == 7
        report = await rig.step()
        assert report.packed == 7
        assert await statuses(conn) == {"processing": 10}
