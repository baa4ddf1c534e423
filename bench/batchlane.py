"""The overnight lane (docs/overnight.md) against both providers' batch API emulators.

In one process: a fresh database, the provider emulator and the reference
function on loopback, and the app's lane steps (`aiqueue.queue.overnight.run`, as a
per-minute cron runs them). Time is emulated: each step moves the provider's
clock and the lane's `now` on by a minute, so a night takes seconds. Rows
that fall back go live, where an in-process worker claims them and reports
them at the live price; a live row takes `LIVE_SECONDS` with `SLOTS` at once.

- healthy: the provider answers every line within half an hour;
- stalled: it never answers; a cancel takes 10 minutes;
- slow: it answers six hours' worth of lines at an even pace, past the
  fallback point; a cancel takes 10 minutes (lines done meanwhile count).

Figures: rows marked, rows applied twice (each application adds one to the
'completed' tally), rows marked after their deadline (emulated), rows paid
twice (the provider ran the line and live marking ran it too), the cost
against the live price of the same tokens, what the provider keeps after.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal
from uuid import UUID

import asyncpg

from aiqueue.batch.pack import live_estimate
from aiqueue.models import Completed
from aiqueue.queue.overnight import lane_config, run
from aiqueue.queue.spend import cost_usd
from aiqueue.runtime import Runtime
from aiqueue.settings.kinds import DEFAULT_POOL
from tests.batchapi.common import Behaviour, Clock
from tests.integration.batch_kit import lane_settings, served
from tests.plans import plan_of

Scenario = Literal["healthy", "stalled", "slow"]
PAYLOAD = {"question": "Explain photosynthesis.", "max_score": 10,
           "rubric": "- sunlight (3 points)\n- chlorophyll (3 points)\n- CO2 and water (4 points)"}
ANSWER = ("Plants use sunlight, absorbed by chlorophyll, to turn carbon dioxide and water "
          "into glucose and oxygen. ") * 6
STEP = 60.0  # the cron's period
SLOTS, LIVE_SECONDS = 8, 10.0
DEADLINE = 3 * 3600.0  # after the enqueue
BEHAVIOURS = {
    "healthy": Behaviour(delay=1800),
    "stalled": Behaviour(stall=True, cancel_delay=600),
    "slow": Behaviour(delay=6 * 3600, cancel_delay=600),
}


@dataclass(frozen=True)
class LaneRun:
    rows: int
    completed: int
    applied_twice: int
    paid_twice: int
    late: int
    fell_back: int
    lane_cost: float
    live_cost: float
    hours: float  # emulated time from the enqueue until every row was marked
    app_seconds: float  # wall time the app spent in its lane steps
    held: int  # files and batches the provider still keeps at the end


@dataclass
class _Tally:
    live: set[str] = dataclasses.field(default_factory=set)
    late: int = 0
    last: float = 0.0  # emulated time the last row was marked


async def _seed(conn: asyncpg.Connection, n: int) -> list[UUID]:
    rows = await conn.fetch(
        "INSERT INTO submissions (id, assignment_id, content) "
        "SELECT gen_random_uuid(), 'hw-night', $2 || g FROM generate_series(1, $1) g "
        "RETURNING id", n, ANSWER)
    return [r["id"] for r in rows]


async def _live(rt: Runtime, now: float, deadline: float, tally: _Tally) -> None:
    """Mark the live-due rows as a live function would: SLOTS at once, LIVE_SECONDS each."""
    wave = []
    while (job := await rt.store.claim(plan_of(0, 5))) is not None:
        usage = {"model": rt.settings.queue.pools[DEFAULT_POOL].batch_model,
                 "prompt_tokens": 300, "completion_tokens": 40}
        priced = {**usage, "cost_usd": cost_usd(usage, rt.settings.model_prices)}
        await rt.store.complete(Completed(job.queue_id, job.dispatch_seq,
                                          {"score": 5, "max_score": 10}, priced), plan_of(0))
        wave.append(str(job.queue_id))
    for k in range(len(wave)):
        done = now + live_estimate(k + 1, LIVE_SECONDS, SLOTS)
        tally.late += done > deadline
        tally.last = max(tally.last, done)
    tally.live.update(wave)


async def run_lane(provider: str, dsn: str, scenario: Scenario = "healthy",
                   rows: int = 2000) -> LaneRun:
    clock = Clock()
    conn = await asyncpg.connect(dsn)
    with served(provider, clock, {}) as (emu, emu_url, fn_url):
        emu.behaviours = lambda n: BEHAVIOURS[scenario] if n == 1 else Behaviour(delay=1800)
        emu.window_seconds = 86400.0  # the providers' 24 h
        settings = lane_settings(provider, dsn, emu, emu_url, fn_url, max_in_flight=SLOTS,
                                 dispatch_timeout_seconds=30.0)
        rt = await Runtime.create(settings, dsn)
        pool = settings.queue.pools[DEFAULT_POOL]
        config = dataclasses.replace(lane_config(rt, pool), poll_seconds=0.0,
                                     default_live_seconds=LIVE_SECONDS)
        start = clock()
        deadline = start + DEADLINE
        ids = await _seed(conn, rows)
        due = datetime.fromtimestamp(deadline, UTC)
        outcome = await rt.store.enqueue(ids, "hw-night", 0, PAYLOAD, batch=(due, due))
        assert len(outcome.queue_ids) == rows  # type: ignore[union-attr]
        tally, app, fell_back = _Tally(), 0.0, 0
        try:
            while await rt.store.batch_open_count() or await _open_rows(conn):
                if clock() - start > 2 * 86400:
                    raise TimeoutError("the lane did not finish within two emulated days")
                t0 = time.perf_counter()
                report = await run(rt, config, now=clock())
                app += time.perf_counter() - t0
                assert report is not None
                fell_back += report.fell_back
                if report.applied:
                    tally.late += report.applied if clock() > deadline else 0
                    tally.last = max(tally.last, clock())
                await _live(rt, clock(), deadline, tally)
                clock.advance(STEP)
            figures = await _figures(conn, rt)
        finally:
            await rt.close()
            await conn.close()
        held = sum(len(v) for v in emu.held().values())
        twice = len({cid[:36] for cid in emu.answered_ids} & tally.live)
    completed, applied, lane_cost, live_cost = figures
    return LaneRun(rows=rows, completed=completed, applied_twice=applied - rows,
                   paid_twice=twice, late=tally.late, fell_back=fell_back,
                   lane_cost=lane_cost, live_cost=live_cost,
                   hours=(tally.last - start) / 3600, app_seconds=app, held=held)


async def _open_rows(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                                   "WHERE status IN ('pending', 'processing')"))


async def _figures(conn: asyncpg.Connection, rt: Runtime) -> tuple[int, int, float, float]:
    """(rows completed, results applied, what they cost, the live price of their tokens)."""
    completed = await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE status = 'completed'")
    applied = await conn.fetchval(
        "SELECT coalesce(sum(n), 0) FROM ai_marking_tally WHERE job = 'completed'")
    paid = live = 0.0
    for record in await conn.fetch("SELECT usage FROM ai_marking_queue"):
        usage = json.loads(record["usage"])
        paid += usage.get("cost_usd") or 0.0
        live += cost_usd({k: v for k, v in usage.items() if k != "cost_usd"},
                         rt.settings.model_prices) or 0.0
    return int(completed), int(applied), paid, live
