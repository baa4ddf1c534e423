"""Flow control against a model with a budget (docs/concepts.md).

The product (`aiqueue serve`), the reference function (backend `openai`) and
the model emulator (bench/model.py) as three processes: jobs are enqueued, and
when none is left pending or processing the rows and the model's counters say
how it went: rows failed, the share of model calls refused, and the budget
used while work remained (tokens the model served over what its budget could
serve from the first call to the last answer: the bucket's initial fill plus
its refill).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx

from bench.common import ROOT, free_port, spawn, wait_http
from bench.loop import SECRET, seed_submissions


@dataclass(frozen=True)
class FlowSetup:
    """The model's budget and the queue's settings for one run."""

    jobs: int = 300
    cap: int = 8
    window: float = 10.0
    jobs_per_window: int = 30
    call_tokens: int = 800
    latency: tuple[float, float] = (0.4, 0.6)
    declare: bool = False  # QUEUE_TOKENS_PER_MINUTE set to the model's budget
    # The model also sends `retry-after-ms` (when one call fits), as Azure's OpenAI does;
    # the function then relays that, not the reset of the whole budget.
    retry_after_ms: bool = False
    timeout: float = 600.0

    @property
    def budget_tokens(self) -> int:
        return self.jobs_per_window * self.call_tokens


@dataclass(frozen=True)
class FlowRun:
    failed: int
    completed: int
    calls: int
    refused: int
    tokens_used: int
    seconds: float
    most_busy: int
    used_share: float
    # Seconds from the first call to each call and each refusal.
    calls_at: tuple[float, ...] = ()
    refused_at: tuple[float, ...] = ()

    @property
    def refused_share(self) -> float:
        return self.refused / self.calls if self.calls else 0.0

    def refused_share_after(self, seconds: float) -> float:
        """The share of calls refused from `seconds` after the first call on: once the
        queue has learned the model's window, a short run's share without its start."""
        calls = sum(t >= seconds for t in self.calls_at)
        return sum(t >= seconds for t in self.refused_at) / calls if calls else 0.0


def _env(setup: FlowSetup, dsn: str, fn_port: int) -> dict[str, str]:
    env = {
        "DATABASE_URL": dsn, "MARKING_QUEUE_SECRET": SECRET,
        "AI_MARKING_FUNCTION_URL": f"http://127.0.0.1:{fn_port}/mark",
        "QUEUE_MAX_IN_FLIGHT": str(setup.cap),
        # The ticker wakes for the end of a hold even when nothing is in flight.
        "QUEUE_TICK_SECONDS": "1", "QUEUE_RETRY_BASE_SECONDS": "0.5",
    }
    if setup.declare:
        env["QUEUE_TOKENS_PER_MINUTE"] = str(round(setup.budget_tokens * 60 / setup.window))
        env["QUEUE_BUDGET_WINDOW_SECONDS"] = str(setup.window)
    return env


async def _drain(dsn: str, timeout: float) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + timeout
        while await conn.fetchval("SELECT count(*) FROM ai_marking_queue"
                                  " WHERE status IN ('pending', 'processing')"):
            if time.monotonic() > deadline:
                raise RuntimeError("the queue did not drain in time")
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


async def run_flow(setup: FlowSetup, dsn: str, logs: Path | None = None) -> FlowRun:
    """One run against the emulator; `dsn` is a migrated, empty database."""
    ids = await seed_submissions(dsn, setup.jobs)
    model_port, fn_port, app_port = free_port(), free_port(), free_port()
    logs = logs or ROOT / "bench"
    model = spawn(["-m", "bench.model", str(model_port), "--tokens", str(setup.budget_tokens),
                   "--window", str(setup.window), "--call-tokens", str(setup.call_tokens),
                   "--latency", *map(str, setup.latency),
                   *(["--retry-after-ms"] if setup.retry_after_ms else [])])
    fn = spawn(["-m", "functions.ai_mark", "--port", str(fn_port), "--log-level", "warning"],
               env={"AI_MARK_BACKEND": "openai", "AI_MARK_MODEL": "emulated",
                    "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}"})
    app = spawn(["-m", "aiqueue", "serve", "--port", str(app_port)],
                env=_env(setup, dsn, fn_port), log=logs / f".flow-serve-{app_port}.log")
    try:
        wait_http(f"http://127.0.0.1:{model_port}/stats")
        wait_http(f"http://127.0.0.1:{fn_port}/healthz")
        wait_http(f"http://127.0.0.1:{app_port}/healthz")
        async with httpx.AsyncClient(timeout=60) as client:
            r = await client.post(
                f"http://127.0.0.1:{app_port}/api/marking/enqueue",
                headers={"authorization": f"Bearer {SECRET}"},
                json={"assignment_id": "flow", "submission_ids": ids,
                      "payload": {"rubric": "r", "max_score": 10}})
            r.raise_for_status()
            await _drain(dsn, setup.timeout)
            stats = (await client.get(f"http://127.0.0.1:{model_port}/stats")).json()
        conn = await asyncpg.connect(dsn)
        try:
            counts = dict(await conn.fetch("SELECT status, count(*) FROM ai_marking_queue"
                                           " GROUP BY status"))
        finally:
            await conn.close()
    finally:
        for proc in (app, fn, model):
            proc.terminate()
            proc.wait(10)
    seconds = stats["seconds"] or 0.0
    # What the model could have served meanwhile: its bucket full at the start,
    # then its refill.
    capacity = setup.budget_tokens * (1 + seconds / setup.window)
    return FlowRun(
        failed=counts.get("failed", 0), completed=counts.get("completed", 0),
        calls=stats["calls"], refused=stats["refused"], tokens_used=stats["tokens_used"],
        seconds=seconds, most_busy=stats["most_busy"],
        used_share=stats["tokens_used"] / capacity if capacity else 0.0,
        calls_at=tuple(stats["calls_at"]), refused_at=tuple(stats["refused_at"]))
