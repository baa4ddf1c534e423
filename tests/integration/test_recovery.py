"""A dead invocation gives its slot back fast (CONTRACT §8e): real PostgreSQL, platforms via respx.

Time moves by shifting the row's timestamps into the past, never by sleeping.
Every test counts dispatches: nothing is dispatched twice unless a retry is due.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import asyncpg
import httpx
import pytest
import respx

from aiqueue import loop
from aiqueue.callbacks import apply_item, parse_item
from aiqueue.db.gateway import queries
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from aiqueue.target_settings import DoTarget, LambdaTarget
from aiqueue.web.app import create_app
from tests.conftest import SECRET, SELF_CHAIN, add_submissions, make_settings

DO_HOST = "https://faas-test.doserverless.co"
NS = "fn-test"
INVOKE = f"{DO_HOST}/api/v1/namespaces/{NS}/actions/ai-mark/mark"
ACTIVATIONS = f"{DO_HOST}/api/v1/namespaces/{NS}/activations/"
LAMBDA = "https://lambda.eu-west-1.amazonaws.com/2015-03-31/functions/ai-mark"
# The recovery thresholds of these tests (seconds).
STUCK, HEARTBEAT, ACTION_LIMIT, GRACE = 600.0, 90.0, 600.0, 30.0


class Platform:
    """respx routes of a DigitalOcean namespace: invokes, and one activation record per id."""

    def __init__(self, mock: respx.MockRouter) -> None:
        self.records: dict[str, Any] = {}  # activation id -> record (absent: 404)
        self.looks = 0
        self.invoke = mock.post(url__startswith=INVOKE).mock(side_effect=self._invoke)
        mock.get(url__startswith=ACTIVATIONS).mock(side_effect=self._activation)
        mock.post(SELF_CHAIN).mock(return_value=httpx.Response(200, json={}))
        self.dispatches: list[dict[str, Any]] = []

    def _invoke(self, request: httpx.Request) -> httpx.Response:
        self.dispatches.append(json.loads(request.content))
        return httpx.Response(202, json={"activationId": f"act{len(self.dispatches)}"})

    def _activation(self, request: httpx.Request) -> httpx.Response:
        self.looks += 1
        record = self.records.get(request.url.path.rsplit("/", 1)[1])
        if record is None:
            return httpx.Response(404, json={"error": "The requested resource does not exist."})
        return httpx.Response(200, json=record)

    def finish(self, n: int, *, success: bool, result: dict[str, Any],
               status: str = "success") -> None:
        """Activation n (1-based) ends: OpenWhisk's record, the action's return as result."""
        self.records[f"act{n}"] = {
            "activationId": f"act{n}", "start": 1, "end": 2, "duration": 1,
            "response": {"status": status, "success": success, "result": result}}


def completed_item(dispatch: dict[str, Any], score: int = 4) -> dict[str, Any]:
    return {"queue_id": dispatch["queue_id"], "token": dispatch["callback_token"],
            "status": "completed", "result": {"score": score, "max_score": 5},
            "usage": {"model": "m", "prompt_tokens": 10, "completion_tokens": 5}}


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as router:
        yield router


async def runtime(db_url: str, **overrides: Any) -> Runtime:
    settings: Settings = make_settings(
        db_url, max_attempts=3, stuck_after_seconds=STUCK, heartbeat_timeout_seconds=HEARTBEAT,
        platform_grace_seconds=GRACE, breaker_threshold=100, **overrides)
    return await Runtime.create(settings, db_url)


@pytest.fixture
async def do_rt(db_url: str) -> AsyncIterator[Runtime]:
    target = DoTarget(DO_HOST, NS, "ai-mark", "mark", "user", "key", ACTION_LIMIT)
    rt = await runtime(db_url, dispatch_target="digitalocean", digitalocean=target)
    yield rt
    await rt.close()


async def step(rt: Runtime) -> loop.StepResult:
    return await loop.process_step(rt, force=True)


async def age(conn: asyncpg.Connection, seconds: float) -> None:
    """Everything in flight happened `seconds` earlier."""
    shift = timedelta(seconds=seconds)
    await conn.execute(
        "UPDATE ai_marking_queue SET started_at = started_at - $1::interval,"
        " lease_at = lease_at - $1::interval WHERE lease_at IS NOT NULL", shift)
    await conn.execute("UPDATE ai_marking_attempts SET look_after = look_after - $1::interval,"
                       " started_at = started_at - $1::interval", shift)


async def start_one(rt: Runtime, conn: asyncpg.Connection) -> UUID:
    ids = await add_submissions(conn, 1)
    (queue_id,) = (await rt.store.enqueue(ids, "hw-1", 0, {})).queue_ids
    assert (await step(rt)).dispatched
    return queue_id


async def row(conn: asyncpg.Connection, queue_id: UUID) -> asyncpg.Record:
    return await conn.fetchrow(
        "SELECT q.status, q.last_error, q.attempts, s.ai_result::text AS result,"
        " (SELECT count(*) FROM ai_marking_results r WHERE r.queue_id = q.queue_id) AS applied"
        " FROM ai_marking_queue q JOIN submissions s ON s.id = q.submission_id"
        " WHERE q.queue_id = $1", queue_id)


async def history(conn: asyncpg.Connection, queue_id: UUID) -> list[tuple[Any, ...]]:
    rows = await conn.fetch(
        "SELECT dispatch_seq, outcome, error, platform FROM ai_marking_attempts"
        " WHERE queue_id = $1 AND kind = 'dispatch' ORDER BY id", queue_id)
    return [tuple(r) for r in rows]


# -- DigitalOcean: ask before recovering -------------------------------------------


async def test_a_lost_callback_of_a_finished_activation_is_applied_without_a_dispatch(
    do_rt: Runtime, conn: asyncpg.Connection, mock: respx.MockRouter
):
    platform = Platform(mock)
    queue_id = await start_one(do_rt, conn)
    (sent,) = platform.dispatches
    platform.finish(1, success=True, result={"callback": [completed_item(sent)]})
    await age(conn, HEARTBEAT - 5)
    await step(do_rt)
    assert platform.looks == 0  # not quiet long enough yet
    await age(conn, 10)
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
    wait = await loop.recovery.next_wakeup(http_rt)
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


async def test_recovery_keeps_to_the_lease_index_with_many_rows_in_flight(
    conn: asyncpg.Connection
):
    # QUEUE_MAX_IN_FLIGHT=0 lets thousands of rows hold a lease; recovery runs
    # once a second per instance and must only touch the ones whose time came.
    await add_submissions(conn, 3000)
    await conn.execute(
        "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status,"
        " started_at, lease_at) SELECT id, 'hw-1', gen_random_uuid(), 'processing', now(),"
        " now() FROM submissions")
    await conn.execute("ANALYZE ai_marking_queue")
    sql = queries()["recover_stuck"]
    plan = "\n".join(r[0] for r in await conn.fetch(
        "EXPLAIN " + sql, STUCK, 3, HEARTBEAT, ACTION_LIMIT + GRACE, False))
    assert "ai_marking_queue_lease_idx" in plan and "Seq Scan on ai_marking_queue" not in plan
