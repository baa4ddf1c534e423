"""A batch lane on loopback: a real database, a provider emulator and the reference function."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from aiqueue.batch.pack import LaneConfig, StepReport
from aiqueue.queue.overnight import lane_config, lane_times, run
from aiqueue.runtime import Runtime
from aiqueue.settings import ModelPrice, Settings
from aiqueue.settings.kinds import DEFAULT_POOL, Pool, QueueConfig
from functions.ai_mark.server import create_app
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.batchapi.anthropic_api import AnthropicBatchAPI
from tests.batchapi.common import Behaviour, Clock
from tests.batchapi.openai_api import OpenAIBatchAPI
from tests.conftest import add_submissions, make_settings
from tests.e2e.servers import free_port, run_asgi

FN_TOKEN = "fn-token-for-batch"
PRICES = {"gpt-4o-mini": ModelPrice(0.15, 0.60), "claude-haiku-4-5": ModelPrice(1.0, 5.0)}
MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5"}


@dataclasses.dataclass
class Rig:
    """The app's runtime, the provider emulator, its clock and its batches' fates."""

    rt: Runtime
    emu: OpenAIBatchAPI | AnthropicBatchAPI
    clock: Clock
    fates: dict[int, Behaviour]
    conn: asyncpg.Connection
    config: LaneConfig
    provider: str

    async def enqueue(self, n: int, deadline: datetime | None = None,
                      assignment: str = "hw-b") -> list[Any]:
        ids = await add_submissions(self.conn, n, assignment, content="photosynthesis")
        batch = await lane_times(self.rt, DEFAULT_POOL, deadline)
        outcome = await self.rt.store.enqueue(
            ids, assignment, 0, {"rubric": "- names chlorophyll", "max_score": 10},
            batch=batch)
        return list(outcome.queue_ids)  # type: ignore[union-attr]

    async def step(self, **config: Any) -> StepReport:
        return await run(self.rt, dataclasses.replace(self.config, **config))

    async def statuses(self) -> dict[str, int]:
        rows = await self.conn.fetch(
            "SELECT status, count(*) AS n FROM ai_marking_queue GROUP BY status")
        return {r["status"]: r["n"] for r in rows}

    def held(self) -> dict[str, list[str]]:
        return self.emu.held()


@contextmanager
def served(provider: str, clock: Clock, fates: dict[int, Behaviour]
           ) -> Iterator[tuple[Any, str, str]]:
    """The emulator and the reference function on loopback: (emulator, its URL, fn URL)."""
    cls = OpenAIBatchAPI if provider == "openai" else AnthropicBatchAPI
    emu = cls(behaviours=lambda n: fates.get(n, Behaviour(delay=1)), clock=clock,
              window_seconds=3600)
    fn = create_app(FunctionSettings(simulate_latency=0, function_token=FN_TOKEN))
    emu_port, fn_port = free_port(), free_port()
    with run_asgi(emu.app, emu_port), run_asgi(fn, fn_port):
        yield emu, f"http://127.0.0.1:{emu_port}/v1", f"http://127.0.0.1:{fn_port}/"


def batch_pool(name: str, provider: str, emu: Any, emu_url: str, **keys: Any) -> Pool:
    """A pool whose batch API is the emulator (as `[pools.<name>] batch = ...` declares it)."""
    found = {"batch": provider, "batch_base_url": emu_url, "batch_key_env": "BATCH_KEY",
             "batch_model": MODELS[provider], "batch_api_key": emu.key, **keys}
    return Pool(name=name, **{"max_in_flight": 0, **found}, declared=frozenset(found))


def lane_settings(provider: str, db_url: str, emu: Any, emu_url: str, fn_url: str,
                  **settings: Any) -> Settings:
    """The app's settings with a batch lane on the emulator and the function on loopback:
    the default pool's, as `[pools.default]` in aiqueue.toml declares it."""
    pool = batch_pool(DEFAULT_POOL, provider, emu, emu_url)
    base = make_settings(db_url, function_url=fn_url, function_token=FN_TOKEN,
                         **{"max_in_flight": 4, **settings})
    return dataclasses.replace(base, model_prices=PRICES, queue_file=QueueConfig(
        {DEFAULT_POOL: pool}, {}))


@asynccontextmanager
async def lane_rig(provider: str, db_url: str, conn: asyncpg.Connection, **settings: Any
                   ) -> AsyncIterator[Rig]:
    clock: Clock = Clock()
    fates: dict[int, Behaviour] = {}
    with served(provider, clock, fates) as (emu, emu_url, fn_url):
        s = lane_settings(provider, db_url, emu, emu_url, fn_url, **settings)
        rt = await Runtime.create(s, db_url)
        lane = dataclasses.replace(lane_config(rt, s.queue.pools[DEFAULT_POOL]),
                                   poll_seconds=0.0, default_live_seconds=5.0)
        try:
            yield Rig(rt, emu, clock, fates, conn, lane, provider)
        finally:
            await rt.close()


def soon(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)
