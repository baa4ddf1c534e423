"""A dead invocation on DigitalOcean (docs/guarantees.md): the activation is read before recovery.

Real PostgreSQL, the Functions API via respx; every test counts dispatches.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest
import respx

from aiqueue.db.gateway import queries
from aiqueue.queue.results import apply_item, parse_item
from aiqueue.runtime import Runtime
from aiqueue.web.app import create_app
from tests.conftest import SECRET, add_submissions, make_settings
from tests.integration.plan_kit import seq_scans_the_record
from tests.integration.recovery_kit import (
    ACTION_LIMIT,
    ACTIVATIONS,
    GRACE,
    HEARTBEAT,
    STUCK,
    Platform,
    age,
    completed_item,
    do_runtime,
    history,
    row,
    runtime,
    start_one,
    step,
)


@pytest.fixture
async def do_rt(db_url: str) -> AsyncIterator[Runtime]:
    rt = await do_runtime(db_url, ACTION_LIMIT)
    yield rt
    await rt.close()


# -- DigitalOcean: ask before recovering -------------------------------------------


async def test_a_lost_callback_of_a_finished_activation_is_applied_without_a_dispatch(
    do_rt: Runtime, conn: asyncpg.Connection, mock: respx.MockRouter
):
    platform = Platform(mock)
    queue_id = await start_one(do_rt, conn)
    (sent,) = platform.dispatches
    platform.finish(1, success=True, result={"callback": [completed_item(sent)]})
    await age(conn, 5)
    await step(do_rt)
    # Not quiet long enough yet: before any result, 10 s (3x p95 at least 10 s).
    assert platform.looks == 0
    await age(conn, 6)
    result = await step(do_rt)
    assert result.recovered == 1 and platform.looks == 1
    r = await row(conn, queue_id)
    assert (r["status"], r["applied"], json.loads(r["result"])["score"]) == ("completed", 1, 4)
    assert await history(conn, queue_id) == [(1, "completed", None, "applied_from_activation")]
    assert len(platform.dispatches) == 1  # 0 extra dispatches: no second model call
    # The callback arrives after all: nothing is applied twice.
    item = parse_item(completed_item(sent, score=1), do_rt.tokens)
    assert item is not None and not await apply_item(do_rt, item)
    assert (await row(conn, queue_id))["applied"] == 1


async def test_items_without_a_valid_token_for_that_attempt_are_not_applied(
    do_rt: Runtime, conn: asyncpg.Connection, mock: respx.MockRouter
):
    platform = Platform(mock)
    queue_id = await start_one(do_rt, conn)
    (sent,) = platform.dispatches
    forged = {**completed_item(sent), "token": "forged"}
    other_attempt = {**completed_item(sent), "token": do_rt.tokens.callback(queue_id, 7, 7)}
    platform.finish(1, success=True, result={"callback": [forged, other_attempt, "junk"]})
    await age(conn, HEARTBEAT + 1)
    await step(do_rt)
    r = await row(conn, queue_id)
    # Failed (retry backoff 0 here: dispatched again in the same step), nothing applied.
    assert (r["status"], r["last_error"], r["applied"]) == (
        "processing", "activation_no_result", 0)
    assert (await history(conn, queue_id))[0] == (
        1, "activation_failed", "activation_no_result", "activation_failed")


@pytest.mark.parametrize(("status", "error", "code", "said"), [
    ("action developer error", "The action exhausted its memory and was aborted.",
     "activation_out_of_memory", "activation_failed"),
    ("action developer error", "The action exceeded its time limits of 600000 milliseconds.",
     "activation_timeout", "timed_out"),
    ("application error", "KeyError: 'the student wrote this'", "activation_error",
     "activation_failed"),
    ("whisk internal error", "Failed to run container", "activation_platform_error",
     "activation_failed"),
])
async def test_a_failed_activation_fails_the_attempt_now_and_the_retry_follows_the_rules(
    do_rt: Runtime, conn: asyncpg.Connection, mock: respx.MockRouter, status: str, error: str,
    code: str, said: str
):
    platform = Platform(mock)
    queue_id = await start_one(do_rt, conn)
    platform.finish(1, success=False, status=status, result={"error": error})
    await age(conn, HEARTBEAT + 1)
    result = await step(do_rt)
    # Failed at the first look, long before the action's limit; the retry's backoff is 0
    # here (make_settings), so the same step dispatches it again: one dispatch per attempt.
    assert result.recovered == 1 and result.dispatched
    assert len(platform.dispatches) == 2
    assert await history(conn, queue_id) == [(1, "activation_failed", code, said),
                                             (2, None, None, None)]
    r = await row(conn, queue_id)
    assert (r["status"], r["last_error"], r["attempts"]) == ("processing", code, 2)
    assert "student" not in repr(await history(conn, queue_id))


async def test_a_still_running_activation_is_not_dispatched_again_before_its_limit(
    do_rt: Runtime, conn: asyncpg.Connection, mock: respx.MockRouter
):
    platform = Platform(mock)
    queue_id = await start_one(do_rt, conn)
    await age(conn, HEARTBEAT + 1)
    await step(do_rt)
    assert platform.looks == 1
    assert await history(conn, queue_id) == [(1, None, None, "still_running")]
    await step(do_rt)
    assert platform.looks == 1  # asked again only after another quiet spell
    elapsed = HEARTBEAT + 1
    while elapsed + HEARTBEAT < ACTION_LIMIT + GRACE:
        await age(conn, HEARTBEAT)
        elapsed += HEARTBEAT
        await step(do_rt)
        assert (await row(conn, queue_id))["status"] == "processing"
    assert len(platform.dispatches) == 1 and platform.looks > 1
    await age(conn, ACTION_LIMIT + GRACE - elapsed + 1)
    result = await step(do_rt)
    assert result.recovered == 1 and len(platform.dispatches) == 2
    assert (await history(conn, queue_id))[0] == (1, "stuck", "platform_timeout", "timed_out")


async def test_a_platform_that_cannot_be_asked_is_asked_again_and_the_limit_still_holds(
    do_rt: Runtime, conn: asyncpg.Connection, mock: respx.MockRouter
):
    platform = Platform(mock)
    mock.get(url__startswith=ACTIVATIONS).mock(return_value=httpx.Response(500))
    queue_id = await start_one(do_rt, conn)
    await age(conn, HEARTBEAT + 1)
    await step(do_rt)
    assert await history(conn, queue_id) == [(1, None, None, "lookup_failed")]
    await age(conn, ACTION_LIMIT + GRACE)
    await step(do_rt)
    assert len(platform.dispatches) == 2
    assert (await history(conn, queue_id))[0] == (1, "stuck", "platform_timeout", "timed_out")


async def test_two_instances_ask_about_a_dispatch_once(
    do_rt: Runtime, db_url: str, conn: asyncpg.Connection, mock: respx.MockRouter
):
    platform = Platform(mock)
    await start_one(do_rt, conn)
    await age(conn, HEARTBEAT + 1)
    other = await runtime(db_url, dispatch_target="digitalocean",
                          digitalocean=do_rt.settings.digitalocean)
    try:
        await step(do_rt)
        await step(other)
    finally:
        await other.close()
    assert platform.looks == 1


async def test_the_row_page_says_what_the_platform_said(
    do_rt: Runtime, db_url: str, conn: asyncpg.Connection, mock: respx.MockRouter
):
    platform = Platform(mock)
    queue_id = await start_one(do_rt, conn)
    platform.finish(1, success=True, result={"callback": [completed_item(platform.dispatches[0])]})
    await age(conn, HEARTBEAT + 1)
    await step(do_rt)
    running = await start_one(do_rt, conn)
    await age(conn, HEARTBEAT + 1)
    await step(do_rt)
    app = create_app(make_settings(db_url))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://app.test") as client:
        r = await client.post("/ai-queue/login", data={"password": SECRET, "next": "/ai-queue"})
        assert r.status_code == 303
        done = (await client.get(f"/ai-queue/rows/{queue_id}")).text
        waiting = (await client.get(f"/ai-queue/rows/{running}")).text
    await app.state.aiqueue.close()
    assert "platform: applied from the activation" in done and "act1" in done
    assert "platform: still running (no activation record yet)" in waiting


@pytest.mark.fresh_db
async def test_recovery_keeps_to_the_lease_index_with_many_rows_in_flight(
    conn: asyncpg.Connection
):
    # QUEUE_MAX_IN_FLIGHT=0 lets thousands of rows hold a lease; recovery runs
    # once a second per instance and must only touch the ones whose time came.
    await add_submissions(conn, 3000)
    await conn.execute(
        "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status,"
        " started_at) SELECT id, 'hw-1', gen_random_uuid(), 'processing', now()"
        " FROM submissions")
    await conn.execute("INSERT INTO ai_marking_claimed (queue_id, dispatch_seq, pool, kind) "
                       "SELECT queue_id, dispatch_seq, pool, kind FROM ai_marking_queue")
    await conn.execute("ANALYZE ai_marking_queue")
    await conn.execute("ANALYZE ai_marking_claimed")
    sql = queries()["recover_stuck"]
    plan = "\n".join(r[0] for r in await conn.fetch(
        "EXPLAIN " + sql, STUCK, 3, HEARTBEAT, ACTION_LIMIT + GRACE, False, "{}", None, []))
    assert "ai_marking_claimed_lease_idx" in plan and not seq_scans_the_record(plan)
