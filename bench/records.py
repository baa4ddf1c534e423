"""A school's data: the export of 10,000 attempts and a 10,000-row replay."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg
import httpx

from bench.common import free_port, fresh_database, spawn, wait_http
from bench.db import SECRET

AUTH = {"authorization": f"Bearer {SECRET}"}


async def seed_history(dsn: str, n: int, status: str) -> None:
    """n submissions, each with one `status` row, one finished attempt and (completed) a result."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO submissions (id, assignment_id, content) "
            "SELECT gen_random_uuid(), 'a' || (g % 20), 'answer ' || g "
            "FROM generate_series(1, $1) g", n)
        await conn.execute(
            "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status, "
            "attempts, dispatch_seq, started_at, finished_at, last_error) "
            "SELECT s.id, s.assignment_id, gen_random_uuid(), $1, 3, 3, now() - interval '1 h', "
            "now() - interval '59 minutes', CASE WHEN $1 = 'failed' THEN 'model_timeout' END "
            "FROM submissions s", status)
        await conn.execute(
            "INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt, started_at, "
            "ended_at, outcome, error, usage) SELECT q.queue_id, 3, 3, q.started_at, "
            "q.finished_at, CASE WHEN q.status = 'failed' THEN 'failed' ELSE 'completed' END, "
            "q.last_error, '{\"model\": \"m\", \"prompt_tokens\": 800, "
            "\"completion_tokens\": 160, \"cost_usd\": 0.0004}' FROM ai_marking_queue q")
        if status == "completed":
            await conn.execute(
                "INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, run_id, "
                "applied_at, result, model, prompt_tokens, completion_tokens, cost_usd) "
                "SELECT q.queue_id, q.submission_id, q.assignment_id, q.run_id, q.finished_at, "
                "jsonb_build_object('score', 7, 'max_score', 10, 'feedback', repeat('f', 400)), "
                "'m', 800, 160, 0.0004 FROM ai_marking_queue q")
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


@contextmanager
def _app(dsn: str) -> Iterator[str]:
    port = free_port()
    app = spawn(["-m", "aiqueue", "serve", "--port", str(port)], env={
        "DATABASE_URL": dsn, "MARKING_QUEUE_SECRET": SECRET, "QUEUE_TICK_SECONDS": "0",
        "AI_MARKING_FUNCTION_URL": "http://127.0.0.1:9/unreachable", "QUEUE_MAX_IN_FLIGHT": "1"})
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/healthz")
        yield base
    finally:
        app.terminate()
        app.wait(10)


async def export_time(name: str, n: int = 10_000) -> tuple[float, int]:
    """Seconds to stream the export of n attempts and n results as CSV, and the lines read."""
    dsn = await fresh_database(name)
    await seed_history(dsn, n, "completed")
    with _app(dsn) as base:
        async with httpx.AsyncClient(timeout=120) as client:
            lines = 0
            started = time.perf_counter()
            async with client.stream("GET", f"{base}/api/marking/export", headers=AUTH) as r:
                assert r.status_code == 200, r.status_code
                async for _line in r.aiter_lines():
                    lines += 1
            elapsed = time.perf_counter() - started
    assert lines == 2 * n + 1, lines  # the header, every attempt and every result
    return elapsed, lines


async def replay_time(name: str, n: int = 10_000) -> float:
    """Seconds from sending a replay of n failed rows to its answer, over HTTP."""
    dsn = await fresh_database(name)
    await seed_history(dsn, n, "failed")
    conn = await asyncpg.connect(dsn)
    # Paused: the replayed rows wait, so only the replay itself is timed.
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    await conn.close()
    with _app(dsn) as base:
        async with httpx.AsyncClient(timeout=60) as client:
            # Warm the connection and the server's plan caches with a dry run.
            await client.post(f"{base}/api/marking/replay", headers=AUTH,
                              json={"filter": {}, "dry_run": True})
            started = time.perf_counter()
            r = await client.post(f"{base}/api/marking/replay", headers=AUTH,
                                  json={"filter": {"error": "model_timeout"}})
            elapsed = time.perf_counter() - started
    assert r.status_code == 200 and r.json() == {"matched": n, "replayed": n}, r.text
    return elapsed
