"""One step's lane work is bounded (docs/overnight.md): packing and applying stop when the
step's lane time is spent, in chunks, and the rest is done by the next steps."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import asyncpg
import pytest

from aiqueue.batch import apply, pack
from aiqueue.batch.pack import StepReport
from aiqueue.queue.overnight import run
from tests.integration.batch_kit import Rig, lane_rig

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["openai", "anthropic"])
async def rig(request: pytest.FixtureRequest, db_url: str, conn: asyncpg.Connection
              ) -> AsyncIterator[Rig]:
    async with lane_rig(request.param, db_url, conn) as out:
        yield out


class Ticks:
    """The lane's clock, one second on at each look at it: a step given 2 s sees 1 s left
    at its first look (the first chunk goes) and none at its second."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now


async def spent(rig: Rig, monkeypatch: pytest.MonkeyPatch, **config: object) -> StepReport:
    """A lane step with time for one chunk of work."""
    ticks = Ticks()
    with monkeypatch.context() as patch:
        patch.setattr(pack, "time", ticks)
        cfg = dataclasses.replace(rig.config, **config)  # type: ignore[arg-type]
        return await run(rig.rt, cfg, until=2.0)


async def test_packing_stops_at_the_steps_end_and_the_next_step_goes_on(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    await rig.enqueue(12)
    first = await spent(rig, monkeypatch, render_rows=5, upload_seconds=0)
    assert (first.packed, first.batches) == (5, 1)  # one chunk, then the time was up
    assert await rig.statuses() == {"processing": 5, "pending": 7}
    second = await rig.step(render_rows=5)
    assert (second.packed, second.batches) == (7, 1)  # with time, chunk after chunk


async def test_applying_stops_between_chunks_and_resumes(rig: Rig,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(apply, "CHUNK", 4)
    await rig.enqueue(10)
    await rig.step()
    rig.clock.advance(2)
    first = await spent(rig, monkeypatch)
    assert first.applied == 4  # one chunk, then the time was up
    assert await rig.statuses() == {"completed": 4, "processing": 6}
    second = await rig.step()
    assert second.applied == 6 and second.deleted == 1  # the rest, none applied twice
    assert await rig.statuses() == {"completed": 10}
    assert await rig.conn.fetchval(
        "SELECT coalesce(sum(n), 0) FROM ai_marking_tally WHERE job = 'completed'") == 10
    assert all(not v for v in rig.held().values())
