"""Signed dispatch ids against a real PostgreSQL and the reference function.

A model's fast refusal (`retry_after` of a few milliseconds) gives the row's
attempt back; its re-dispatch, signed within the same second, must carry an
id of its own, be taken by the function, and use no attempt.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
import respx
from starlette.types import ASGIApp, Receive, Scope, Send

from aiqueue.dispatch import Accepted
from aiqueue.queue.handout import dispatch_async
from aiqueue.queue.results import refuse
from aiqueue.runtime import Runtime
from functions.ai_mark.server import Worker, create_app
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.conftest import add_submissions, make_settings

SIGNING = "whsec_" + base64.b64encode(b"redispatch-signing-key-0123456789").decode()
CALLBACK = "http://app.test/webhooks/ai-mark"


class Heard:
    """Wraps the function's app and keeps each request's webhook-id and answer status."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[tuple[str, int]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers", ()))
        msg_id = headers.get(b"webhook-id", b"").decode()

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                self.seen.append((msg_id, message["status"]))
            await send(message)

        await self.app(scope, receive, sending)


@pytest.fixture
async def world(db_url: str) -> AsyncIterator[tuple[Runtime, Heard]]:
    settings = make_settings(db_url, signing_secret=SIGNING, callback_url=CALLBACK,
                             breaker_threshold=1)
    rt = await Runtime.create(settings, db_url)
    function = create_app(FunctionSettings(simulate_latency=0, callback_backoff=0,
                                           signing_secret=SIGNING))
    heard = Heard(function)
    await rt.http.aclose()
    rt.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=heard))
    with respx.mock(assert_all_called=False) as mock:
        # The function's callbacks (the app is not served here): answered, then ignored.
        mock.post(CALLBACK).mock(return_value=httpx.Response(200, json={}))
        yield rt, heard
        worker: Worker = function.state.worker
        await worker.close()
    await rt.http.aclose()
    await rt.store.close()


async def test_a_fast_refusal_then_a_redispatch_in_the_same_second_is_no_replay(
    world: tuple[Runtime, Heard], conn: asyncpg.Connection
) -> None:
    rt, heard = world
    s = rt.settings
    [sub] = await add_submissions(conn, 1)
    await rt.store.enqueue([sub], "hw-1", 0, {"rubric": "Names light", "max_score": 2})
    first = await rt.store.claim(s.claim_plan)
    assert first is not None
    assert isinstance(await dispatch_async(rt, first), Accepted)
    # The model refused at once (OpenAI's retry-after-ms: 20): the attempt is given back.
    status, _ = await refuse(rt, first.queue_id, first.dispatch_seq, first.attempt,
                             kind="rate_limited", retry_after=0.02)
    assert status == "pending"
    await asyncio.sleep(0.05)
    again = await rt.store.claim(s.claim_plan)
    assert again is not None and again.attempt == first.attempt == 1
    assert isinstance(await dispatch_async(rt, again), Accepted)
    # Two dispatches, two ids, both taken: neither answered 409 replayed.
    assert heard.seen == [(f"{first.queue_id}.{first.dispatch_seq}", 202),
                          (f"{again.queue_id}.{again.dispatch_seq}", 202)]
    assert again.dispatch_seq > first.dispatch_seq
    row = await conn.fetchrow("SELECT status, attempts FROM ai_marking_queue"
                              " WHERE queue_id = $1", first.queue_id)
    assert tuple(row) == ("processing", 1)
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_attempts"
                               " WHERE outcome IN ('dispatch_error', 'failed')") == 0
    assert await conn.fetchval("SELECT consecutive_failures FROM ai_queue_control") == 0
