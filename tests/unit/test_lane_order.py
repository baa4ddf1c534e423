"""A live dispatch never waits behind the overnight lane (docs/overnight.md): the step claims and
dispatches first, then gives the lane its bounded turn; in sync mode the lane runs beside
the function's call."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import respx

from aiqueue.queue import loop, overnight
from aiqueue.runtime import Runtime
from tests.unit.dispatch_kit import FN, runtime
from tests.unit.fakes import FakeStore, make_job


@pytest.fixture
def order(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What happened, in order: "dispatch" (the function got the job) and "lane"."""
    seen: list[str] = []

    async def lane(rt: Runtime, force: bool) -> int:
        seen.append("lane")
        await asyncio.sleep(0.05)  # a lane step takes a while
        seen.append("lane done")
        return 0

    monkeypatch.setattr(overnight, "run_if_due", lane)
    return seen


@respx.mock
async def test_the_step_dispatches_before_the_lane_runs(client: httpx.AsyncClient,
                                                        order: list[str]) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        order.append("dispatch")
        return httpx.Response(202)

    respx.post(FN).mock(side_effect=answer)
    step = await loop.process_step(runtime(FakeStore(jobs=[make_job()]), client), force=True)
    assert step.dispatched
    assert order == ["dispatch", "lane", "lane done"]


@respx.mock
async def test_in_sync_mode_the_lane_runs_beside_the_call(client: httpx.AsyncClient,
                                                          order: list[str]) -> None:
    async def answer(request: httpx.Request) -> httpx.Response:
        order.append("dispatch")
        await asyncio.sleep(0.02)
        order.append("answered")
        return httpx.Response(200, json={"status": "completed", "result": {"score": 1}})

    respx.post(FN).mock(side_effect=answer)
    rt = runtime(FakeStore(jobs=[make_job()]), client, function_mode="sync")
    step = await loop.process_step(rt, force=True)
    assert step.sync_job is not None and order == []  # deferred: not before the call
    await loop.run_sync(rt, step.sync_job)
    assert order[0] == "dispatch" and order.index("lane") < order.index("answered")
