"""Callback delivery: retries with backoff, no retry on refusals, heartbeats while marking."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import respx

from functions.ai_mark.callback import RetryPolicy, mark_and_deliver, post_items
from functions.ai_mark.items import Marking
from functions.ai_mark.job import Job
from functions.ai_mark.simulate import SimulatorBackend

from .conftest import CALLBACK_URL, make_dispatch

ITEM: dict[str, Any] = {"queue_id": "q-1", "token": "t", "status": "failed", "error": "x"}
FAST = RetryPolicy(tries=5, base_delay=0)


class Recorder:
    """An injected sleep that records the backoff instead of waiting it out."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def test_backoff_doubles_and_is_capped() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


async def test_5xx_then_200_is_retried(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(
        side_effect=[httpx.Response(503), httpx.Response(502), httpx.Response(200)]
    )
    sleep = Recorder()
    async with httpx.AsyncClient() as client:
        delivered = await post_items(client, CALLBACK_URL, [ITEM], RetryPolicy(), sleep)
    assert delivered is True
    assert route.call_count == 3
    assert sleep.delays == [0.5, 1.0]
    assert json.loads(route.calls.last.request.content) == [ITEM]  # a JSON array of one item


async def test_connection_errors_are_retried(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(
        side_effect=[httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.Response(200)]
    )
    async with httpx.AsyncClient() as client:
        assert await post_items(client, CALLBACK_URL, [ITEM], FAST) is True
    assert route.call_count == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_4xx_is_not_retried(respx_mock: respx.MockRouter, status: int) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(status))
    sleep = Recorder()
    async with httpx.AsyncClient() as client:
        assert await post_items(client, CALLBACK_URL, [ITEM], RetryPolicy(), sleep) is False
    assert route.call_count == 1
    assert sleep.delays == []


async def test_429_is_retried_as_a_busy_signal(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(
        side_effect=[httpx.Response(429), httpx.Response(200)]
    )
    async with httpx.AsyncClient() as client:
        assert await post_items(client, CALLBACK_URL, [ITEM], FAST) is True
    assert route.call_count == 2


async def test_gives_up_after_the_configured_tries(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(500))
    sleep = Recorder()
    async with httpx.AsyncClient() as client:
        policy = RetryPolicy(tries=3, base_delay=0.25)
        assert await post_items(client, CALLBACK_URL, [ITEM], policy, sleep) is False
    assert route.call_count == 3
    assert sleep.delays == [0.25, 0.5]  # no pointless wait after the last try


async def test_mark_and_deliver_posts_the_result(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    async with httpx.AsyncClient() as client:
        item, delivered = await mark_and_deliver(
            make_dispatch(), SimulatorBackend(latency=0), client, policy=FAST
        )
    assert delivered is True
    assert item["status"] == "completed"
    assert json.loads(route.calls.last.request.content) == [item]


async def test_heartbeats_are_sent_while_the_backend_works(respx_mock: respx.MockRouter) -> None:
    heard = asyncio.Event()
    posted: list[dict[str, Any]] = []

    def webhook(request: httpx.Request) -> httpx.Response:
        (item,) = json.loads(request.content)
        posted.append(item)
        if item["status"] == "progress":
            heard.set()
        return httpx.Response(200)

    class SlowUntilHeartbeat:
        """Finishes only after the webhook heard a heartbeat, so the test cannot race."""

        name = "slow"

        async def mark(self, job: Job) -> Marking:
            await asyncio.wait_for(heard.wait(), timeout=5)
            return Marking(score=1, feedback="ok", model="m")

    respx_mock.post(CALLBACK_URL).mock(side_effect=webhook)
    async with httpx.AsyncClient() as client:
        item, delivered = await mark_and_deliver(
            make_dispatch(), SlowUntilHeartbeat(), client, policy=FAST, heartbeat_seconds=0.01
        )
    assert delivered and item["status"] == "completed"
    beats, final = posted[:-1], posted[-1]
    assert beats and all(b["status"] == "progress" for b in beats)
    assert beats[0]["token"] == "signed-token"
    assert set(beats[0]["progress"]) == {"current", "total", "message"}
    assert final == item


async def test_a_lost_heartbeat_is_not_retried_and_does_not_stop_marking(
    respx_mock: respx.MockRouter,
) -> None:
    calls: list[str] = []

    def webhook(request: httpx.Request) -> httpx.Response:
        (item,) = json.loads(request.content)
        calls.append(item["status"])
        return httpx.Response(503 if item["status"] == "progress" else 200)

    class Slow:
        name = "slow"

        async def mark(self, job: Job) -> Marking:
            while "progress" not in calls:
                await asyncio.sleep(0.005)
            return Marking(score=1, feedback="ok", model="m")

    respx_mock.post(CALLBACK_URL).mock(side_effect=webhook)
    async with httpx.AsyncClient() as client:
        item, delivered = await mark_and_deliver(
            make_dispatch(), Slow(), client, policy=FAST, heartbeat_seconds=0.01
        )
    assert delivered and item["status"] == "completed"
    assert calls[-1] == "completed"
