"""Asking DigitalOcean early (docs/deploying/index.md): a quiet dispatch is asked about at the
earliest of the heartbeat timeout, the action's limit plus the grace, and 3x the
recent p95 processing time (at least 10 s).

Real PostgreSQL, the Functions API via respx; time moves by shifting the rows'
timestamps (recovery_kit.age), never by sleeping.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
import respx

from aiqueue.queue import recovery
from aiqueue.runtime import Runtime
from tests.conftest import add_submissions
from tests.integration.recovery_kit import (
    GRACE,
    HEARTBEAT,
    Platform,
    age,
    completed_item,
    do_runtime,
    history,
    row,
    start_one,
    step,
)

# The action's limit of these tests: long, so that only the p95 term can be early.
LIMIT = 300.0
P95 = 2.0  # the recent results took 1-2 s: asked about after max(10, 3 x 2) = 10 s


async def seed_results(conn: asyncpg.Connection, seconds: list[float]) -> None:
    """Recent results that took `seconds` each (the p95's sample)."""
    subs = await add_submissions(conn, len(seconds), "hw-past")
    await conn.executemany(
        "INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, run_id,"
        " result, processing_seconds) VALUES ($1, $2, 'hw-past', $3, '{}', $4)",
        [(uuid.uuid4(), s, uuid.uuid4(), t) for s, t in zip(subs, seconds, strict=True)])


@pytest.fixture
async def do_rt(db_url: str, conn: asyncpg.Connection) -> AsyncIterator[Runtime]:
    await seed_results(conn, [1.0] * 18 + [P95, P95])
    rt = await do_runtime(db_url, LIMIT)
    yield rt
    await rt.close()


async def test_the_recent_p95_sets_when_a_quiet_dispatch_is_asked_about(do_rt: Runtime):
    t = await recovery.thresholds(do_rt)
    assert t.p95 == pytest.approx(P95) and t.quiet == 10.0
    assert recovery.Thresholds(600, 90, 330, True, 25.0).quiet == 75.0
    assert recovery.Thresholds(600, 90, 330, True, 40.0).quiet == 90.0  # the heartbeat's
    assert recovery.Thresholds(600, 90, 330, True, None).quiet == 10.0  # no result yet


async def test_a_lost_callback_frees_its_slot_after_3x_p95_not_the_heartbeat_timeout(
    do_rt: Runtime, conn: asyncpg.Connection, mock: respx.MockRouter
):
    platform = Platform(mock)
    queue_id = await start_one(do_rt, conn)
    (sent,) = platform.dispatches
    # The action ended at once; its callback was lost.
    platform.finish(1, success=True, result={"callback": [completed_item(sent)]})
    await age(conn, 8)
    await step(do_rt)
    assert platform.looks == 0  # quiet for less than 10 s: not asked yet
    await age(conn, 3)
    assert (await step(do_rt)).recovered == 1 and platform.looks == 1
    r = await row(conn, queue_id)
    assert (r["status"], r["applied"], json.loads(r["result"])["score"]) == ("completed", 1, 4)
    assert len(platform.dispatches) == 1  # nothing paid twice


async def test_not_found_means_still_running_it_is_asked_again_then_recovered_at_the_bound(
    do_rt: Runtime, conn: asyncpg.Connection, mock: respx.MockRouter
):
    platform = Platform(mock)
    queue_id = await start_one(do_rt, conn)
    await age(conn, 11)
    await step(do_rt)
    # Asked early; 404: the action is still running, so the row waits.
    assert platform.looks == 1 and (await row(conn, queue_id))["status"] == "processing"
    assert await history(conn, queue_id) == [(1, None, None, "still_running")]
    # The next look is due one quiet period later, not at once.
    wait = await recovery.next_wakeup(do_rt)
    assert wait is not None and 8.0 < wait <= 10.0
    await step(do_rt)
    assert platform.looks == 1
    await age(conn, 10)
    await step(do_rt)
    assert platform.looks == 2 and (await row(conn, queue_id))["status"] == "processing"
    # Past the action's limit plus the grace, "not found" means gone: recovered,
    # and (the slot being free again) dispatched anew in the same step.
    await age(conn, LIMIT + GRACE)
    assert (await step(do_rt)).recovered == 1
    assert (await history(conn, queue_id))[0] == (1, "stuck", "platform_timeout", "timed_out")
    assert len(platform.dispatches) == 2


async def test_the_ticker_wakes_for_the_early_look(
    do_rt: Runtime, conn: asyncpg.Connection, mock: respx.MockRouter
):
    Platform(mock)
    await start_one(do_rt, conn)
    wait = await recovery.next_wakeup(do_rt)
    # 10 s after the dispatch (3x p95, at least 10 s), not the heartbeat timeout's 90 s.
    assert wait is not None and 9.0 < wait <= 10.0 < HEARTBEAT


async def test_before_any_result_a_quiet_dispatch_is_asked_about_after_10_s(
    db_url: str, conn: asyncpg.Connection, mock: respx.MockRouter
):
    """A 3 s action, no result yet: its lost callback is found at the first look (10 s)."""
    rt = await do_runtime(db_url, limit=3.0)
    try:
        platform = Platform(mock)
        queue_id = await start_one(rt, conn)
        (sent,) = platform.dispatches
        platform.finish(1, success=True, result={"callback": [completed_item(sent)]})
        assert (await recovery.thresholds(rt)).p95 is None  # no results yet
        wait = await recovery.next_wakeup(rt)
        assert wait is not None and 9.0 < wait <= 10.0 < 3.0 + GRACE
        await age(conn, 11)
        assert (await step(rt)).recovered == 1 and platform.looks == 1
        assert (await row(conn, queue_id))["status"] == "completed"
        assert len(platform.dispatches) == 1
    finally:
        await rt.close()


async def test_a_short_action_limit_bounds_the_wait_when_the_record_never_shows(
    db_url: str, conn: asyncpg.Connection, mock: respx.MockRouter
):
    """A 3 s action whose callback is lost and whose record never shows: slot back at 33 s."""
    rt = await do_runtime(db_url, limit=3.0)
    try:
        platform = Platform(mock)
        queue_id = await start_one(rt, conn)
        await age(conn, 11)
        await step(rt)
        assert platform.looks == 1 and (await row(conn, queue_id))["status"] == "processing"
        await age(conn, 3.0 + GRACE - 10)
        assert (await step(rt)).recovered == 1 and platform.looks == 2
        assert (await history(conn, queue_id))[0] == (1, "stuck", "platform_timeout",
                                                      "timed_out")
    finally:
        await rt.close()


async def test_the_p95_counts_from_the_first_result(db_url: str, conn: asyncpg.Connection):
    rt = await do_runtime(db_url, limit=300.0)
    try:
        assert (await recovery.thresholds(rt)).p95 is None
        await seed_results(conn, [6.0])
        rt.own(recovery.RecentP95).due = 0.0  # the next read (a few seconds later)
        t = await recovery.thresholds(rt)
        assert t.p95 == pytest.approx(6.0) and t.quiet == 18.0
        # A result found by asking the platform took as long as its lost callback was
        # waited for: it would lengthen the next wait, so it is left out.
        await seed_results(conn, [31.0, 32.0])
        await conn.execute(
            "INSERT INTO ai_marking_queue (queue_id, submission_id, assignment_id, run_id,"
            " status) SELECT queue_id, submission_id, assignment_id, run_id, 'completed'"
            " FROM ai_marking_results WHERE processing_seconds > 30")
        await conn.execute(
            "INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt, platform)"
            " SELECT queue_id, 1, 1, 'applied_from_activation' FROM ai_marking_results"
            " WHERE processing_seconds > 30")
        rt.own(recovery.RecentP95).due = 0.0
        assert (await recovery.thresholds(rt)).quiet == 18.0
    finally:
        await rt.close()
