"""The local ASGI app through httpx.ASGITransport: ack, background marking, callback."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx
from starlette.applications import Starlette

from functions.ai_mark.items import Marking
from functions.ai_mark.job import Job
from functions.ai_mark.server import MAX_BODY_BYTES, Worker, create_app
from functions.ai_mark.settings import Settings

from .conftest import CALLBACK_URL, make_dispatch

TOKEN = "fn-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Gate:
    """A backend that marks only when the test opens the gate."""

    name = "gate"

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.started = asyncio.Event()

    async def mark(self, job: Job) -> Marking:
        self.started.set()
        await self.open.wait()
        return Marking(score=4, feedback="ok", model="gate")


@pytest.fixture
def settings(sim_settings: Settings) -> Settings:
    return dataclasses.replace(sim_settings, function_token=TOKEN)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[Starlette]:
    app = create_app(settings)
    yield app
    await worker(app).close()


def worker(app: Starlette) -> Worker:
    result: Worker = app.state.worker
    return result


def client_for(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fn.test")


@pytest.mark.parametrize("path", ["/", "/mark"])
async def test_ack_202_then_the_callback_arrives(
    app: Starlette, respx_mock: respx.MockRouter, path: str
) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    async with client_for(app) as client:
        response = await client.post(path, json=make_dispatch(), headers=AUTH)
    assert response.status_code == 202
    assert response.json() == {"accepted": True, "queue_id": make_dispatch()["queue_id"]}
    await worker(app).drain()
    (item,) = json.loads(route.calls.last.request.content)
    assert item["status"] == "completed" and item["token"] == "signed-token"
    assert item["result"]["simulated"] is True
    assert worker(app).in_flight == 0 and not worker(app).tasks


async def test_the_ack_does_not_wait_for_marking(
    settings: Settings, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    gate = Gate()
    app = create_app(settings, backend=gate)
    async with client_for(app) as client:
        first = await client.post("/", json=make_dispatch(queue_id="q-1"), headers=AUTH)
        second = await client.post("/", json=make_dispatch(queue_id="q-2"), headers=AUTH)
        await asyncio.wait_for(gate.started.wait(), timeout=5)
        health = await client.get("/healthz")
    assert first.status_code == second.status_code == 202
    assert health.json() == {"ok": True, "backend": "simulate", "in_flight": 2}
    assert not route.called  # nothing is marked yet
    gate.open.set()
    await worker(app).close()  # what shutdown does: finish the jobs, then close
    assert route.call_count == 2
    assert worker(app).in_flight == 0
    queue_ids = {json.loads(call.request.content)[0]["queue_id"] for call in route.calls}
    assert queue_ids == {"q-1", "q-2"}


async def test_lifespan_shutdown_drains_running_jobs(
    settings: Settings, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    gate = Gate()
    app = create_app(settings, backend=gate)
    async with app.router.lifespan_context(app):
        async with client_for(app) as client:
            assert (await client.post("/", json=make_dispatch(), headers=AUTH)).status_code == 202
        await asyncio.wait_for(gate.started.wait(), timeout=5)
        asyncio.get_running_loop().call_soon(gate.open.set)
    assert route.call_count == 1


async def test_sync_route_answers_with_the_item(app: Starlette) -> None:
    async with client_for(app) as client:
        response = await client.post("/sync", json=make_dispatch(callback_url=None), headers=AUTH)
    assert response.status_code == 200
    item = response.json()
    assert item["status"] == "completed" and item["queue_id"] == make_dispatch()["queue_id"]
    assert worker(app).in_flight == 0


async def test_sync_route_reports_bad_input_as_a_failed_item(app: Starlette) -> None:
    dispatch = make_dispatch(payload={"max_score": 5})
    async with client_for(app) as client:
        response = await client.post("/sync", json=dispatch, headers=AUTH)
    assert response.status_code == 200
    assert response.json()["error"] == "invalid_input"
    assert response.json()["retryable"] is False


@pytest.mark.parametrize(
    ("headers", "content", "status", "code"),
    [
        ({}, json.dumps(make_dispatch()), 401, "unauthorized"),
        ({"Authorization": "Bearer nope"}, json.dumps(make_dispatch()), 401, "unauthorized"),
        ({"Authorization": f"Basic {TOKEN}"}, json.dumps(make_dispatch()), 401, "unauthorized"),
        (AUTH, "{oops", 400, "invalid_json"),
        (AUTH, "", 400, "invalid_json"),
        (AUTH, "[]", 422, "invalid_dispatch"),
        (AUTH, json.dumps(make_dispatch(callback_token="")), 422, "invalid_dispatch"),
        (AUTH, json.dumps(make_dispatch(callback_url="not a url")), 422, "invalid_dispatch"),
        (AUTH, " " * (MAX_BODY_BYTES + 1), 413, "too_large"),
    ],
)
async def test_rejections(
    app: Starlette, headers: dict[str, str], content: str, status: int, code: str
) -> None:
    async with client_for(app) as client:
        response = await client.post("/", content=content, headers=headers)
    assert response.status_code == status
    assert response.json()["error"] == code
    assert not worker(app).tasks and worker(app).in_flight == 0


async def test_an_over_long_chunked_body_is_refused_before_it_is_read(app: Starlette) -> None:
    sent = 0
    chunk = b" " * 65_536
    total = 4 * MAX_BODY_BYTES // len(chunk)

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(total):
            sent += 1
            yield chunk

    # No content-length: the body is chunked, its size unknown until read.
    async with client_for(app) as client:
        response = await client.post("/", content=body(), headers=AUTH)
    assert response.status_code == 413 and response.json()["error"] == "too_large"
    assert sent <= MAX_BODY_BYTES // len(chunk) + 2 < total
    assert not worker(app).tasks and worker(app).in_flight == 0


async def test_healthz_needs_no_token(app: Starlette) -> None:
    async with client_for(app) as client:
        response = await client.get("/healthz")
    assert response.status_code == 200 and response.json()["in_flight"] == 0


async def test_failed_callback_does_not_break_the_worker(
    app: Starlette, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(401))
    body: dict[str, Any] = make_dispatch()
    async with client_for(app) as client:
        assert (await client.post("/", json=body, headers=AUTH)).status_code == 202
    await worker(app).drain()
    assert route.call_count == 1  # refused: not retried
    assert worker(app).in_flight == 0
