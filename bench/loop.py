"""Dispatch gap, end-to-end throughput, CPU per job and invocations per job, over real HTTP."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench.common import (
    ROOT,
    cpu_seconds,
    free_port,
    fresh_database,
    machine_cpu_seconds,
    percentile,
    spawn,
    wait_http,
)

SECRET = "bench-secret-0123456789abcdef"
# A rubric-sized enqueue payload: 2 KB of JSON (question, rubric, max_score).
PAYLOAD_2KB = {"question": "Explain why the sky is blue. " * 8,
               "rubric": "One point for each named idea, explained in the student's words. " * 27,
               "max_score": 10}


@dataclass
class LoopRun:
    cap: int
    jobs: int
    seconds: float
    jobs_per_s: float
    cpu_ms_per_job: float
    gap_p50_ms: float
    gap_p99_ms: float
    invocations_per_job: float
    max_in_flight: int
    # The database's own counts (pg_stat_database, pg_stat_user_functions), per job:
    # its transactions (one per round trip of a per-job statement), the time its
    # backends spent running statements, and the settle function's own time per call.
    xacts_per_job: float = float("nan")
    server_ms_per_job: float = float("nan")
    settle_ms: float = float("nan")
    # Every process's CPU on the machine per job (bench/common.py machine_cpu_seconds).
    machine_cpu_ms_per_job: float = float("nan")


# The database's counters, read once the app's sessions have ended (their
# statistics are flushed then): transactions, time spent running statements.
_DB_STATS = ("SELECT xact_commit + xact_rollback AS xacts, active_time FROM pg_stat_database "
             "WHERE datname = current_database()")
_SETTLE_STATS = ("SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(total_time), 0) AS ms "
                 "FROM pg_stat_user_functions WHERE funcname IN ('aiqueue_settle_many', "
                 "'aiqueue_settle')")


async def _db_stats(dsn: str) -> tuple[float, float, float, float]:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        db = await conn.fetchrow(_DB_STATS)
        fn = await conn.fetchrow(_SETTLE_STATS)
        return float(db["xacts"]), float(db["active_time"] or 0), float(fn["calls"]), \
            float(fn["ms"])
    finally:
        await conn.close()


async def _submission_ids(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        return [str(r["id"]) for r in await conn.fetch("SELECT id FROM submissions ORDER BY id")]
    finally:
        await conn.close()


async def seed_submissions(dsn: str, n: int) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        ids = [uuid.uuid4() for _ in range(n)]
        await conn.copy_records_to_table(
            "submissions", records=[(i, "bench", f"answer {k}") for k, i in enumerate(ids)],
            columns=["id", "assignment_id", "content"])
        return [str(i) for i in ids]
    finally:
        await conn.close()


async def _wait_done(dsn: str, done_sql: str, n: int, timeout: float) -> tuple[float, int]:
    """The moment `done_sql` (a count of completed jobs) reaches n, and how many times it
    was asked (its transactions are not the app's).  It asks every 5 ms: asked back to
    back, the count took a core of the two and a third of the server time it measured."""
    conn = await asyncpg.connect(dsn)
    polls = 0
    try:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            done = await conn.fetchval(done_sql)
            polls += 1
            if done >= n:
                return time.perf_counter(), polls
            await asyncio.sleep(0.005)
        raise RuntimeError(f"only {done} of {n} jobs completed in {timeout}s")
    finally:
        await conn.close()


def _count_invocations(log: Path) -> int:
    calls = 0
    for line in log.read_text().splitlines():
        try:
            event = json.loads(line).get("event")
        except ValueError:
            continue
        calls += event in ("process", "webhook")
    return calls


async def _timed_run(
    cap: int, jobs: int, dsn: str, fn_port: int, *, app_args: list[str], app_env: dict[str, str],
    health: str, enqueue: str, body: dict[str, Any], headers: dict[str, str], done_sql: str,
    log: Path | None = None, batch: int = 1, seconds: float = 0.0,
) -> LoopRun:
    """Start an app and the instant function, enqueue, time it until every job is done."""
    app_port = free_port()
    # Each plpgsql function's calls and time, for the settle's server time.
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute(f"ALTER DATABASE {await admin.fetchval('SELECT current_database()')}"
                            " SET track_functions = 'pl'")
    finally:
        await admin.close()
    before = await _db_stats(dsn)
    fn = spawn(["-m", "bench.fnserver", str(fn_port), str(batch), str(seconds)])
    app = spawn([*app_args, str(app_port)], env=app_env, log=log)
    try:
        wait_http(f"http://127.0.0.1:{fn_port}/stats")
        wait_http(f"http://127.0.0.1:{app_port}{health}")
        cpu_before, machine_before = cpu_seconds(app.pid), machine_cpu_seconds()
        async with httpx.AsyncClient(timeout=60) as client:
            started = time.perf_counter()
            r = await client.post(f"http://127.0.0.1:{app_port}{enqueue}", headers=headers,
                                  json=body)
            r.raise_for_status()
            finished, polls = await _wait_done(dsn, done_sql, jobs, timeout=300)
            cpu_after, machine_after = cpu_seconds(app.pid), machine_cpu_seconds()
            await asyncio.sleep(0.3)  # let trailing log lines land
            stats = (await client.get(f"http://127.0.0.1:{fn_port}/stats")).json()
    finally:
        for proc in (app, fn):
            proc.terminate()
            proc.wait(10)
    await asyncio.sleep(0.5)  # the app's sessions end and flush their statistics
    after = await _db_stats(dsn)
    seconds = finished - started
    gaps = [g * 1000 for g in stats["gaps"]]
    # Less the bench's own: its polls, and the two statistics reads of `before`.
    xacts = after[0] - before[0] - polls - 3
    settles = after[2] - before[2]
    return LoopRun(
        cap=cap, jobs=jobs, seconds=seconds, jobs_per_s=jobs / seconds,
        cpu_ms_per_job=(cpu_after - cpu_before) * 1000 / jobs,
        gap_p50_ms=percentile(gaps, 0.5), gap_p99_ms=percentile(gaps, 0.99),
        invocations_per_job=_count_invocations(log) / jobs if log else float("nan"),
        max_in_flight=stats["max_in_flight"],
        xacts_per_job=xacts / jobs, server_ms_per_job=(after[1] - before[1]) / jobs,
        settle_ms=(after[3] - before[3]) / settles if settles else float("nan"),
        machine_cpu_ms_per_job=(machine_after - machine_before) * 1000 / jobs,
    )


async def run_loop(cap: int, jobs: int, name: str, env: dict[str, str] | None = None,
                   batch: int = 1, seconds: float = 0.0, dsn: str | None = None) -> LoopRun:
    """The product: `python -m aiqueue serve` dispatching to the function, which takes
    `seconds` a job and calls back with `batch` results per webhook (bench/fnserver.py).
    `dsn`: a database already seeded with `jobs` submissions (seed_submissions)."""
    if dsn is None:
        dsn = await fresh_database(name)
        await seed_submissions(dsn, jobs)
    ids = await _submission_ids(dsn)
    fn_port = free_port()
    return await _timed_run(
        cap, jobs, dsn, fn_port, app_args=["-m", "aiqueue", "serve", "--port"], app_env={
            "DATABASE_URL": dsn, "MARKING_QUEUE_SECRET": SECRET,
            "AI_MARKING_FUNCTION_URL": f"http://127.0.0.1:{fn_port}/mark",
            "QUEUE_MAX_IN_FLIGHT": str(cap), "QUEUE_TICK_SECONDS": "0", **(env or {}),
        }, health="/healthz", enqueue="/api/marking/enqueue",
        # Every dispatch carries a rubric-sized payload, as a marking job does.
        body={"assignment_id": "bench", "submission_ids": ids, "payload": PAYLOAD_2KB},
        headers={"authorization": f"Bearer {SECRET}"},
        done_sql="SELECT count(*) FROM ai_marking_queue WHERE status = 'completed'",
        log=ROOT / "bench" / f".serve-{name}.log", batch=batch, seconds=seconds)


async def run_baseline(jobs: int, name: str) -> float:
    """Jobs/s of a raw asyncpg claim-and-complete loop: the floor without HTTP."""
    dsn = await fresh_database(name)
    await seed_submissions(dsn, jobs)
    conn = await asyncpg.connect(dsn, statement_cache_size=0)
    try:
        await conn.execute(
            "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id) "
            "SELECT id, assignment_id, gen_random_uuid() FROM submissions")
        started = time.perf_counter()
        while True:
            row = await conn.fetchrow(
                "UPDATE ai_marking_queue SET status = 'processing', attempts = attempts + 1 "
                "WHERE queue_id = (SELECT queue_id FROM ai_marking_queue WHERE status = 'pending' "
                "ORDER BY priority DESC, turn, seq LIMIT 1 FOR UPDATE SKIP LOCKED) "
                "RETURNING queue_id, submission_id")
            if row is None:
                break
            await conn.execute("UPDATE submissions SET ai_result = '{}' WHERE id = $1",
                               row["submission_id"])
            await conn.execute("UPDATE ai_marking_queue SET status = 'completed' "
                               "WHERE queue_id = $1", row["queue_id"])
        return jobs / (time.perf_counter() - started)
    finally:
        await conn.close()


async def run_minimal(cap: int, jobs: int, name: str, dsn: str | None = None) -> LoopRun:
    """The same hops without the product (bench/minimal.py): the floor for the chain."""
    dsn = dsn or await fresh_database(name)
    fn_port = free_port()
    return await _timed_run(
        cap, jobs, dsn, fn_port, app_args=["-m", "bench.minimal"], app_env={
            "DATABASE_URL": dsn, "FN_URL": f"http://127.0.0.1:{fn_port}/mark", "CAP": str(cap),
        }, health="/done", enqueue="/enqueue", body={"n": jobs}, headers={},
        done_sql="SELECT count(*) FROM minimal_jobs WHERE status = 'completed'")
