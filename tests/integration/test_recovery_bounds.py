"""A dead invocation gives its slot back fast: heartbeats, Lambda, late results.

Real PostgreSQL, outgoing HTTP via respx; every test counts dispatches.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest
import respx

from aiqueue.queue import recovery
from aiqueue.queue.results import apply_item, parse_item
from aiqueue.runtime import Runtime
from aiqueue.settings.targets import LambdaTarget
from tests.conftest import SELF_CHAIN
from tests.integration.recovery_kit import (
    GRACE,
    HEARTBEAT,
    LAMBDA,
    STUCK,
    age,
    completed_item,
    history,
    row,
    runtime,
    start_one,
    step,
)

# -- heartbeats, Lambda's timeout, late callbacks ------------------------------------


@pytest.fixture
async def http_rt(db_url: str) -> AsyncIterator[Runtime]:
    rt = await runtime(db_url, max_in_flight=2)
    yield rt
    await rt.close()


async def test_a_silent_heartbeat_is_recovered_after_the_heartbeat_timeout(
    http_rt: Runtime, conn: asyncpg.Connection, function: respx.Route
):
    quiet = await start_one(http_rt, conn)
    beating = await start_one(http_rt, conn)
    seq = int(await conn.fetchval("SELECT dispatch_seq FROM ai_marking_queue WHERE queue_id = $1",
                                  beating))
    assert await http_rt.store.heartbeat(beating, seq, {"current": 1, "total": 2})
    await age(conn, HEARTBEAT + 1)
    assert function.call_count == 2
    result = await step(http_rt)
    # The row that sent a heartbeat is recovered 90 s after it; the one that never did
    # still has its 600 s.
    assert result.recovered == 1
    assert (await row(conn, quiet))["status"] == "processing"
    assert (await history(conn, beating))[0] == (seq, "stuck", "heartbeat_timeout", None)
    assert function.call_count == 3  # the recovered row's next attempt
    await age(conn, STUCK)
    await step(http_rt)
    assert (await history(conn, quiet))[0][1:3] == ("stuck", "stuck_no_result")


async def test_the_tickers_wakeup_follows_the_heartbeat_timeout(
    http_rt: Runtime, conn: asyncpg.Connection, function: respx.Route
):
    queue_id = await start_one(http_rt, conn)
    assert await http_rt.store.heartbeat(queue_id, 1, {})
    wait = await recovery.next_wakeup(http_rt)
    assert wait is not None and HEARTBEAT - 5 < wait <= HEARTBEAT


async def test_lambdas_timeout_bounds_the_wait_and_is_read_once(
    db_url: str, conn: asyncpg.Connection, mock: respx.MockRouter
):
    target = LambdaTarget("eu-west-1", "AKID", "secret", None, "ai-mark", None,
                          "https://lambda.eu-west-1.amazonaws.com")
    rt = await runtime(db_url, dispatch_target="lambda", aws_lambda=target)
    invoke = mock.post(f"{LAMBDA}/invocations").mock(return_value=httpx.Response(
        202, headers={"x-amzn-requestid": "req-1"}))
    config = mock.get(f"{LAMBDA}/configuration").mock(return_value=httpx.Response(
        200, json={"FunctionName": "ai-mark", "Timeout": 120, "MemorySize": 128}))
    mock.post(SELF_CHAIN).mock(return_value=httpx.Response(200, json={}))
    try:
        queue_id = await start_one(rt, conn)
        await age(conn, 120 + GRACE - 2)
        await step(rt)
        assert (await row(conn, queue_id))["status"] == "processing" and invoke.call_count == 1
        await age(conn, 3)
        assert (await step(rt)).recovered == 1
    finally:
        await rt.close()
    assert (await history(conn, queue_id))[0] == (1, "stuck", "platform_timeout", "timed_out")
    assert invoke.call_count == 2 and config.call_count == 1
    signed = config.calls.last.request.headers["authorization"]
    assert signed.startswith("AWS4-HMAC-SHA256 Credential=AKID/") and "/lambda/" in signed


async def test_a_late_callback_after_recovery_is_applied_at_most_once(
    http_rt: Runtime, conn: asyncpg.Connection, function: respx.Route
):
    queue_id = await start_one(http_rt, conn)
    first = json.loads(function.calls.last.request.content)
    await age(conn, STUCK + 1)
    assert (await step(http_rt)).recovered == 1
    second = json.loads(function.calls.last.request.content)
    assert function.call_count == 2 and second["attempt"] == 2
    late = parse_item(completed_item(first, score=3), http_rt.tokens)
    assert late is not None and await apply_item(http_rt, late)
    current = parse_item(completed_item(second, score=5), http_rt.tokens)
    assert current is not None and not await apply_item(http_rt, current)
    r = await row(conn, queue_id)
    assert (r["status"], r["applied"], json.loads(r["result"])["score"]) == ("completed", 1, 3)
    assert function.call_count == 2


