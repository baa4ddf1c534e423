"""Benchmark: the /ai-queue page and its stats at 1,000,000 rows, beside a plain count(*).

    python -m bench.monitor [--rows N] [--repeats N]

Seeds a fresh database (on BENCH_DATABASE_URL, else an embedded PostgreSQL under
/tmp) with INSERT ... SELECT generate_series, vacuums it as autovacuum would, then
times each read the page makes through the real ASGI app and prints a table.
Not a test: the figures go into the issue's closing note.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

from aiqueue.db.migrate import migrate
from aiqueue.reads import stats
from aiqueue.settings import Settings
from aiqueue.web.app import create_app
from bench.common import READY_ROWS

DB = "aiqueue_bench_monitor"
SECRET = "bench-secret-0123456789abcdef"

# History finished at a steady rate over `spread` seconds (default a week: completed
# rows are pruned after 7 days; 1 day is the worst case for the 24 h figures), plus
# a pending backlog: 2 % pending, 3 % failed, 1 % cancelled, 1 processing.
SEED = """
INSERT INTO submissions (id, assignment_id, content)
SELECT gen_random_uuid(), 'hw-' || (g % 200), 'bench'
FROM generate_series(1, $1::integer) g;

INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status, attempts,
    dispatch_seq, created_at, updated_at, started_at, finished_at, lease_at, last_error)
SELECT s.id, s.assignment_id, gen_random_uuid(), x.status,
       CASE x.status WHEN 'failed' THEN 3 WHEN 'pending' THEN 0 ELSE 1 END,
       CASE x.status WHEN 'failed' THEN 3 WHEN 'pending' THEN 0 ELSE 1 END,
       x.created, x.created, x.started, x.finished,
       CASE WHEN x.status = 'processing' THEN now() END,
       CASE WHEN x.status = 'failed' THEN 'http_500' END
FROM (SELECT id, assignment_id, row_number() OVER () AS g FROM submissions) s
CROSS JOIN LATERAL (
    SELECT st AS status,
           CASE WHEN st = 'pending' THEN now() - (s.g % 3600) * interval '1 s'
                ELSE fin - dur - interval '30 s' END AS created,
           CASE WHEN st IN ('pending', 'cancelled') THEN NULL
                WHEN st = 'processing' THEN now() - interval '5 s' ELSE fin - dur END AS started,
           CASE WHEN st IN ('pending', 'processing') THEN NULL ELSE fin END AS finished
    FROM (SELECT CASE WHEN s.g = 1 THEN 'processing'
                      WHEN s.g % 50 = 0 THEN 'pending'
                      WHEN s.g % 33 = 0 THEN 'failed'
                      WHEN s.g % 100 = 1 THEN 'cancelled'
                      ELSE 'completed' END AS st,
                 now() - (s.g * $2::float8 / $1::integer) * interval '1 s' AS fin,
                 (2 + s.g % 58) * interval '1 s' AS dur) v
) x;

INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt, started_at, ended_at,
    outcome, error, usage)
SELECT queue_id, 1, 1, started_at, finished_at,
       CASE status WHEN 'failed' THEN 'dispatch_error' ELSE 'completed' END,
       CASE status WHEN 'failed' THEN 'http_500' END,
       CASE status WHEN 'completed'
            THEN '{"model": "llama3.1:8b", "prompt_tokens": 800, "completion_tokens": 160}'::jsonb
       END
FROM ai_marking_queue WHERE started_at IS NOT NULL;
"""


def _with_db(dsn: str, name: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


async def prepare(admin_dsn: str, rows: int, *, spread_days: float = 7.0,
                  reuse: bool = False) -> str:
    """A fresh, migrated, seeded and vacuumed database; its DSN."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        if reuse and await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DB):
            dsn = _with_db(admin_dsn, DB)
            await migrate(dsn, "up")
            print(f"reusing the seeded database {DB}")
            return dsn
        await conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        await conn.execute(f"CREATE DATABASE {DB}")
    finally:
        await conn.close()
    dsn = _with_db(admin_dsn, DB)
    await migrate(dsn, "up")
    conn = await asyncpg.connect(dsn)
    try:
        started = time.perf_counter()
        # Seeding only: skip the change-feed trigger and FK checks.
        await conn.execute("SET session_replication_role = replica")
        for statement in SEED.split(";\n\n"):
            n_params = 2 if "$2" in statement else 1 if "$1" in statement else 0
            await conn.execute(statement, *[rows, spread_days * 86400][:n_params])
        await conn.execute(READY_ROWS)
        await conn.execute("SET session_replication_role = DEFAULT")
        await conn.execute("VACUUM (ANALYZE) ai_marking_queue")
        await conn.execute("VACUUM (ANALYZE) ai_marking_attempts")
        print(f"seeded {rows:,} rows (finished over {spread_days:g} days) in "
              f"{time.perf_counter() - started:.1f} s")
    finally:
        await conn.close()
    return dsn


async def timed(fn: Callable[[], Awaitable[Any]], repeats: int) -> list[float]:
    for _ in range(2):  # warm the caches and the pool
        await fn()
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def scans(plan: dict[str, Any]) -> list[str]:
    """Node types that read ai_marking_queue, anywhere in a JSON plan."""
    own = [f"{plan['Node Type']} ({plan.get('Index Name', '-')})"] if plan.get(
        "Relation Name") == "ai_marking_queue" else []
    return own + [s for child in plan.get("Plans", []) for s in scans(child)]


async def run(dsn: str, repeats: int) -> None:
    settings = Settings(database_url=dsn, database_direct_url=dsn, queue_secrets=(SECRET,),
                        admin_password=SECRET, app_base_url="http://bench.test",
                        function_url="http://function.test/", tick_seconds=0)
    app = create_app(settings)
    conn = await asyncpg.connect(dsn)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://bench.test") as c:
            await c.post("/ai-queue/login", data={"password": SECRET})
            rt = await app.state.aiqueue.get()
            deep = await conn.fetchrow(
                "SELECT created_at, queue_id FROM ai_marking_queue"
                " ORDER BY created_at DESC, queue_id DESC OFFSET 900000 LIMIT 1")
            cursor = (f"{int(deep['created_at'].timestamp() * 1e6)}_{deep['queue_id']}"
                      if deep else "")
            one = await conn.fetchval("SELECT queue_id FROM ai_marking_queue WHERE status ="
                                      " 'failed' LIMIT 1")

            async def get(path: str) -> None:
                r = await c.get(path)
                assert r.status_code == 200, (path, r.status_code)

            cases: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
                ("SELECT count(*) FROM ai_marking_queue",
                 lambda: conn.fetchval("SELECT count(*) FROM ai_marking_queue")),
                ("stats (read_stats)", lambda: stats.read_stats(rt)),
                ("throughput, 24 h in 5-min buckets",
                 lambda: rt.store.monitor_throughput(86400, 300)),
                ("table: newest 51 rows", lambda: rt.store.list_rows(
                    status=None, assignment_id=None, limit=51)),
                ("assignment suggestions (loose index scan)",
                 lambda: rt.store.monitor_assignments(500)),
                ("GET /api/marking/stats", lambda: c.get(
                    "/api/marking/stats", headers={"authorization": f"Bearer {SECRET}"})),
                ("GET /ai-queue (page + stats)", lambda: get("/ai-queue")),
                ("GET /ai-queue/fragment (live poll, every 4 s)",
                 lambda: get("/ai-queue/fragment")),
                ("GET /ai-queue/fragment?part=chart (every 60 s)",
                 lambda: get("/ai-queue/fragment?part=chart")),
                ("GET /ai-queue?status=failed", lambda: get("/ai-queue?status=failed")),
                ("GET /ai-queue?status=failed&assignment_id=hw-7",
                 lambda: get("/ai-queue?status=failed&assignment_id=hw-7")),
                ("GET /ai-queue?after=<row 900,000>", lambda: get(f"/ai-queue?after={cursor}")),
                ("GET /ai-queue/rows/<id> (history)", lambda: get(f"/ai-queue/rows/{one}")),
            ]
            results = [(name, await timed(fn, repeats)) for name, fn in cases]

            print_table(results, repeats)
            for name in ("stats", "monitor_throughput"):
                sql = rt.store.sql[name]
                args = (86400.0, 300.0) if name == "monitor_throughput" else ()
                plan = json.loads(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args))
                print(f"\nplan of {name}: reads ai_marking_queue by")
                for s in scans(plan[0]["Plan"]):
                    print(f"  {s}")
    finally:
        await conn.close()
        await app.state.aiqueue.close()


def print_table(results: list[tuple[str, list[float]]], repeats: int) -> None:
    base = statistics.median(results[0][1])
    print(f"\n{'what (' + str(repeats) + ' runs)':<52}{'median':>9}{'min':>9}{'max':>9}"
          f"{'× count':>9}")
    print("-" * 88)
    for name, ms in results:
        med = statistics.median(ms)
        print(f"{name:<52}{med:>7.1f}ms{min(ms):>7.1f}ms{max(ms):>7.1f}ms{med / base:>8.2f}×")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--spread-days", type=float, default=7.0,
                        help="finish times spread over this many days (1 = all in the 24 h)")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the database a previous run seeded (any size)")
    args = parser.parse_args()
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    admin = os.environ.get("BENCH_DATABASE_URL")
    handle = None
    if not admin:
        from aiqueue.db.embedded import start_embedded

        # Its own server, so seeding a million rows never slows a test run.
        admin, handle = start_embedded(Path(f"/tmp/aiqueue-bench-pg-{os.getuid()}"))
    dsn = asyncio.run(
        prepare(admin, args.rows, spread_days=args.spread_days, reuse=args.reuse))
    try:
        asyncio.run(run(dsn, args.repeats))
    finally:
        del handle


if __name__ == "__main__":
    main()
