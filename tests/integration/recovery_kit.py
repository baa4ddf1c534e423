"""Shared pieces of the dead-invocation tests: a respx DigitalOcean, time travel.

Time moves by shifting the row's timestamps into the past, never by sleeping.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from uuid import UUID

import asyncpg
import httpx
import respx

from aiqueue.queue import loop
from aiqueue.queue.step_parts import StepResult
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from aiqueue.settings.targets import DoTarget
from tests.conftest import SELF_CHAIN, add_submissions, enqueued, make_settings

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


async def runtime(db_url: str, **overrides: Any) -> Runtime:
    settings: Settings = make_settings(
        db_url, max_attempts=3, stuck_after_seconds=STUCK, heartbeat_timeout_seconds=HEARTBEAT,
        platform_grace_seconds=GRACE, breaker_threshold=100, **overrides)
    return await Runtime.create(settings, db_url)


async def do_runtime(db_url: str, limit: float) -> Runtime:
    """A runtime dispatching to the respx DigitalOcean, its action limited to `limit` seconds."""
    target = DoTarget(DO_HOST, NS, "ai-mark", "mark", "user", "key", limit)
    return await runtime(db_url, dispatch_target="digitalocean", digitalocean=target)


async def step(rt: Runtime) -> StepResult:
    return await loop.process_step(rt, force=True)


async def age(conn: asyncpg.Connection, seconds: float) -> None:
    """Everything in flight happened `seconds` earlier."""
    shift = timedelta(seconds=seconds)
    await conn.execute(
        "UPDATE ai_marking_queue q SET started_at = started_at - $1::interval"
        " FROM ai_marking_claimed c WHERE c.queue_id = q.queue_id", shift)
    await conn.execute(
        "UPDATE ai_marking_claimed SET lease_at = lease_at - $1::interval", shift)
    await conn.execute("UPDATE ai_marking_attempts SET look_after = look_after - $1::interval,"
                       " started_at = started_at - $1::interval", shift)


async def start_one(rt: Runtime, conn: asyncpg.Connection) -> UUID:
    ids = await add_submissions(conn, 1)
    (queue_id,) = enqueued(await rt.store.enqueue(ids, "hw-1", 0, {})).queue_ids
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
