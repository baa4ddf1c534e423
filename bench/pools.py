"""Model pools and task kinds (docs/concepts.md): one pool's model refuses, the other's not.

Three kinds in two pools, each kind with its own reference function
(functions/ai_mark, backend `openai`), each pool with its own model emulator
(bench/model.py):

- pool `tight` (kinds `short` and `essay`): a model with a budget of
  `jobs_per_window` calls per `window` seconds, which refuses what it cannot
  pay for (429), and the queue's cap 8;
- pool `roomy` (kind `code`, at most 2 at once): a model without a budget.

The same number of jobs of each kind is enqueued at once; when none is left
pending or processing, each pool reports the budget it used while its work
remained, the refusals (the model's count and the queue's), the rows failed
and how long its rows took.  A refusal in `tight` must hold no row of `roomy`:
`roomy` finishes in about the time its own cap allows.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx

from bench.common import ROOT, free_port, spawn, wait_http
from bench.flow import _drain
from bench.loop import SECRET, seed_submissions

TOML = """
[pools.tight]
max_in_flight = 8

[pools.roomy]
max_in_flight = 4

[kinds.short]
pool = "tight"
function_url = "http://127.0.0.1:{short}/mark"

[kinds.essay]
pool = "tight"
function_url = "http://127.0.0.1:{essay}/mark"

[kinds.code]
pool = "roomy"
function_url = "http://127.0.0.1:{code}/mark"
max_in_flight = 2
"""
KINDS = ("short", "essay", "code")


@dataclass(frozen=True)
class PoolsSetup:
    jobs_per_kind: int = 100
    window: float = 10.0
    jobs_per_window: int = 30  # the tight model's budget, in calls
    call_tokens: int = 800
    latency: tuple[float, float] = (0.4, 0.6)
    timeout: float = 900.0


@dataclass(frozen=True)
class PoolRun:
    """What one pool did in one run."""

    pool: str
    rows: int
    failed: int
    calls: int
    refused_by_model: int
    refusals_seen: int
    seconds: float  # from the enqueue to the pool's last finished row
    budget_used: float | None  # share of what the model could serve meanwhile; None: no budget


async def run_pools(setup: PoolsSetup, dsn: str, logs: Path | None = None) -> list[PoolRun]:
    """One run against two emulated models; `dsn` is a migrated, empty database."""
    ids = {kind: await seed_submissions(dsn, setup.jobs_per_kind) for kind in KINDS}
    ports = {name: free_port() for name in ("tight", "roomy", *KINDS, "app")}
    logs = logs or ROOT / "bench"
    budget = setup.jobs_per_window * setup.call_tokens
    procs = [
        spawn(["-m", "bench.model", str(ports["tight"]), "--tokens", str(budget),
               "--window", str(setup.window), "--call-tokens", str(setup.call_tokens),
               "--latency", *map(str, setup.latency)]),
        spawn(["-m", "bench.model", str(ports["roomy"]), "--call-tokens",
               str(setup.call_tokens), "--latency", *map(str, setup.latency)]),
    ]
    for kind in KINDS:
        model = ports["roomy" if kind == "code" else "tight"]
        procs.append(spawn(
            ["-m", "functions.ai_mark", "--port", str(ports[kind]), "--log-level", "warning"],
            env={"AI_MARK_BACKEND": "openai", "AI_MARK_MODEL": f"emulated-{kind}",
                 "OPENAI_BASE_URL": f"http://127.0.0.1:{model}"}))
    config = logs / f".pools-{ports['app']}.toml"
    config.write_text(TOML.format(**{k: ports[k] for k in KINDS}))
    procs.append(spawn(["-m", "aiqueue", "serve", "--port", str(ports["app"])], env={
        "DATABASE_URL": dsn, "MARKING_QUEUE_SECRET": SECRET, "AIQUEUE_CONFIG": str(config),
        "QUEUE_TICK_SECONDS": "1", "QUEUE_RETRY_BASE_SECONDS": "0.5",
    }, log=logs / f".pools-serve-{ports['app']}.log"))
    base = f"http://127.0.0.1:{ports['app']}"
    try:
        for name in ("tight", "roomy"):
            wait_http(f"http://127.0.0.1:{ports[name]}/stats")
        for kind in KINDS:
            wait_http(f"http://127.0.0.1:{ports[kind]}/healthz")
        wait_http(f"{base}/healthz")
        async with httpx.AsyncClient(timeout=60) as client:
            started = time.time()
            for kind in KINDS:
                r = await client.post(f"{base}/api/marking/enqueue",
                                      headers={"authorization": f"Bearer {SECRET}"},
                                      json={"assignment_id": f"pools-{kind}", "kind": kind,
                                            "submission_ids": ids[kind],
                                            "payload": {"rubric": "r", "max_score": 10}})
                r.raise_for_status()
            await _drain(dsn, setup.timeout)
            models = {name: (await client.get(f"http://127.0.0.1:{ports[name]}/stats")).json()
                      for name in ("tight", "roomy")}
        return await _report(dsn, setup, models, started)
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(10)
        config.unlink(missing_ok=True)


async def _report(dsn: str, setup: PoolsSetup, models: dict[str, dict[str, float]],
                  started: float) -> list[PoolRun]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = {r["pool"]: r for r in await conn.fetch(
            "SELECT pool, count(*) AS rows, count(*) FILTER (WHERE status = 'failed') AS failed,"
            " extract(epoch FROM max(finished_at)) AS last FROM ai_marking_queue GROUP BY pool")}
        seen = dict(await conn.fetch(
            "SELECT pool, refusals_rate_limited + refusals_overloaded FROM ai_queue_control"))
    finally:
        await conn.close()
    out = []
    for pool in ("tight", "roomy"):
        model, row = models[pool], rows[pool]
        used = None
        if pool == "tight":
            # What the model could have served meanwhile: its bucket full at the
            # start, then its refill (as bench/flow.py counts it).
            budget = setup.jobs_per_window * setup.call_tokens
            capacity = budget * (1 + (model["seconds"] or 0.0) / setup.window)
            used = model["tokens_used"] / capacity if capacity else 0.0
        out.append(PoolRun(pool, int(row["rows"]), int(row["failed"]), int(model["calls"]),
                           int(model["refused"]), int(seen.get(pool, 0)),
                           float(row["last"]) - started, used))
    return out


if __name__ == "__main__":
    from bench.common import fresh_database

    async def _main() -> None:
        for run in await run_pools(PoolsSetup(), await fresh_database("bench_pools_once")):
            print(run)

    asyncio.run(_main())
