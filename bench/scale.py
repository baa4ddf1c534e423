"""A year of a district (docs/performance.md): `python -m bench --only scale`.

Builds, once, with set-based SQL, a database of `ended` completed rows over the
last 13 months (a tenth of them in the oldest month, the one removed below),
each with its attempt and its result, the last day's live events, and
`pending` pending rows, over 1,000 groups, in month partitions.  The database is
kept (`bench_scale_<ended>`) and reused by the next run; the measurements that
change it run on a copy (CREATE DATABASE ... TEMPLATE).

The server is set as a district's would be (docs/performance.md#a-year-of-a-district):
shared_buffers of 2 GB (DISTRICT_SHARED_BUFFERS: a quarter of the 8 GB of a plan with two
dedicated cores, as a district of 40 schools would buy; the claim's working set at
1,000,000 pending rows is about 0.6 GB), applied by this bench when the embedded server
is its own and nobody else is on it (a restart; the setting is reset at once, so the
server's next start is back to the default); else the server is measured as it is and
its size is printed and named in the claim's rows.
Before the claim is timed its relations are read into the server's buffers, as a
district's server holds them (the pending rows were written by their enqueue and every
claim reads them); a freshly started server with a cold disk cache read 2-5 blocks a pick
from disk, 1-3 ms each.

Measured: the claim's server time (50 picks: the median, the p95 and the blocks they read
from outside the buffers); one assignment's queue list, a row's detail,
/api/marking/stats, /metrics and /ai-queue's first paint (p95, through the ASGI
app); removing the oldest month (its history partitions and its month of ended
record rows dropped; the record rows created before the month, in the
upgrade's first part, deleted in the prune's bounded batches) with the dead
rows on the claim's tables before and after; erasing one submission; the
enqueue of 10,000 ids against a bare insert of the same rows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx

from aiqueue.db.embedded import recreate_database, with_database
from aiqueue.db.migrate import migrate
from aiqueue.db.store import Store, connect_pool
from aiqueue.settings import Settings
from aiqueue.web.app import create_app
from bench.common import Table, admin_dsn, district_buffers, percentile
from bench.db import claim_at_scale
from bench.scale_build import ESTIMATES, build, built
from bench.scale_upgrade import record_upgrade_times, upgrade_times
from bench.scale_work import dead_rows, enqueue_vs_bare, remove_oldest_month

SECRET = "bench-secret-0123456789abcdef"
METRICS = "bench-metrics-0123456789abcdef"
GROUPS = 1000
# The claim's choices timed (after six untimed ones).
CLAIM_PICKS = 50


async def scale_database(ended: int, pending: int, prefix: str = "bench_scale") -> str:
    """The kept database of this size, built on first use."""
    admin = admin_dsn()
    name = f"{prefix}_{ended}"
    dsn = with_database(admin, name)
    conn = await asyncpg.connect(admin)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
    finally:
        await conn.close()
    if exists and await built(dsn, ended, pending):
        print(f"reusing {name}", flush=True)
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(ESTIMATES)
        finally:
            await conn.close()
        started = time.perf_counter()
        if await migrate(dsn, "up"):
            # As the upgrade's note advises (docs/performance.md): a migration that
            # rewrote the record left its visibility map empty.
            conn = await asyncpg.connect(dsn, command_timeout=None)
            try:
                await conn.execute("VACUUM (ANALYZE) ai_marking_queue")
            finally:
                await conn.close()
            print(f"migrated {name} and vacuumed its record in "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
        return dsn
    await recreate_database(admin, name)
    await migrate(dsn, "up")
    started = time.perf_counter()
    await build(dsn, ended, pending, GROUPS)
    print(f"built {name} in {time.perf_counter() - started:.0f} s", flush=True)
    return dsn


async def copy_of(dsn: str, name: str) -> str:
    """A copy of the kept database for the measurements that change it."""
    source = urlsplit(dsn).path.lstrip("/")
    return await recreate_database(admin_dsn(), name, template=source)


async def p95(fn: Callable[[], Awaitable[Any]], repeats: int) -> list[float]:
    """Milliseconds of each call after two warm-ups."""
    for _ in range(2):
        await fn()
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


async def pages(dsn: str, repeats: int) -> list[tuple[str, list[float]]]:
    """The reads a teacher and an operator make, through the real ASGI app."""
    settings = Settings(database_url=dsn, database_direct_url=dsn, queue_secrets=(SECRET,),
                        admin_password=SECRET, app_base_url="http://bench.test",
                        function_url="http://function.test/", tick_seconds=0,
                        metrics_token=METRICS)
    app = create_app(settings)
    conn = await asyncpg.connect(dsn)
    auth = {"authorization": f"Bearer {SECRET}"}
    try:
        one = await conn.fetchval("SELECT queue_id FROM ai_marking_queue WHERE assignment_id = "
                                  "'a7' AND status = 'completed' LIMIT 1")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://bench.test", timeout=120) as c:
            await c.post("/ai-queue/login", data={"password": SECRET})

            def get(path: str, headers: dict[str, str] | None = None
                    ) -> Callable[[], Awaitable[None]]:
                async def call() -> None:
                    r = await c.get(path, headers=headers)
                    assert r.status_code == 200, (path, r.status_code)
                return call

            cases = [
                ("queue list, one assignment (API)", get("/api/marking/queue?assignment_id=a7",
                                                         auth)),
                ("row detail (API)", get(f"/api/marking/rows/{one}", auth)),
                ("row detail (/ai-queue/rows)", get(f"/ai-queue/rows/{one}")),
                ("GET /api/marking/stats", get("/api/marking/stats", auth)),
                ("GET /metrics", get("/metrics", {"authorization": f"Bearer {METRICS}"})),
                ("GET /ai-queue (first paint)", get("/ai-queue")),
            ]
            return [(name, await p95(fn, repeats)) for name, fn in cases]
    finally:
        await conn.close()
        await app.state.aiqueue.close()


async def erase_one(dsn: str, repeats: int) -> list[float]:
    """Milliseconds to erase one completed submission (its row, attempt, result, events)."""
    store = Store(await connect_pool(dsn, max_size=2))
    conn = await asyncpg.connect(dsn)
    try:
        subs = [r["submission_id"] for r in await conn.fetch(
            "SELECT submission_id FROM ai_marking_queue WHERE status = 'completed' "
            "AND finished_at > now() - interval '3 days' LIMIT $1", repeats + 1)]
        await store.erase(subs[:1], "cli")  # warm
        out = []
        for sub in subs[1:]:
            started = time.perf_counter()
            counts = await store.erase([sub], "cli")
            out.append((time.perf_counter() - started) * 1000)
            assert counts["ai_marking_queue"] == 1 and counts["ai_marking_results"] == 1, counts
        return out
    finally:
        await conn.close()
        await store.close()


async def scale_rows(rows: Table, repeats: int, ended: int, prefix: str = "bench_scale") -> None:
    """Every scale figure; the kept database is `<prefix>_<ended>`."""
    pending = ended // 10
    buffers = await district_buffers(admin_dsn())
    dsn = await scale_database(ended, pending, prefix)
    label = f"{ended / 1e6:g}M ended, {pending / 1e6:g}M pending, {GROUPS:,} groups"
    print(f"scale: {label}; shared_buffers {buffers}; {datetime.now(UTC):%H:%M} UTC; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    reads: list[int] = []
    server, _ = await claim_at_scale(dsn, max(repeats, CLAIM_PICKS), reads)
    rows.append((f"claim, {label}, warm, shared_buffers {buffers} (server)", "ms", server,
                 None, "<= 0.5"))
    rows.append((f"  the claim's p95 of {len(server)}", "ms", [percentile(server, 0.95)], None,
                 "<= 0.5"))
    rows.append((f"  blocks the picks read from outside {buffers} of buffers", "blocks",
                 [sum(reads)], None, "-"))
    for name, samples in await pages(dsn, max(repeats, 20)):
        rows.append((f"{name}, p95 of {len(samples)}", "ms",
                     [percentile(samples, 0.95)], None, "<= 100"))
    work = await copy_of(dsn, f"{prefix}_work")
    try:
        removal = await remove_oldest_month(work)
        rows.append((f"drop the oldest month ({removal.record_rows:,} record rows, "
                     f"{removal.rows:,} attempts + results)", "ms", [removal.drop_ms], None,
                     "<= 1000"))
        rows.append(("  dead rows on ai_marking_queue, before / after the drop", "rows",
                     [removal.dead_before, removal.dead_after_drop], None, "no rise"))
        rows.append((f"delete the {removal.pruned:,} record rows left, prune batches of 5,000",
                     "ms", [removal.prune_ms], None, "<= 1000 (the month)"))
        rows.append(("  dead rows on ai_marking_queue after the prune", "rows",
                     [removal.dead_after_prune], None, "no rise"))
        rows.append(("erase one submission", "ms", await erase_one(work, max(repeats, 5)), None,
                      "<= 50"))
        ratios = await enqueue_vs_bare(work, repeats)
        rows.append(("enqueue 10,000 ids at scale / bare insert of the same rows", "ratio",
                     ratios, None, "<= 3"))
        rows.append(("  dead rows on the claim's tables at the end", "rows",
                     [await dead_rows(work)], None, "-"))
    finally:
        await recreate_database(admin_dsn(), f"{prefix}_work", create=False)
    if ended <= 1_000_000:  # the figure: 1,000,000 rows a table (--ended 1000000)
        for label, up in (
                (f"upgrade to month partitions, {ended:,} rows in each of 3 tables",
                 await upgrade_times(ended, f"{prefix}_upgrade")),
                (f"upgrade of a record of {ended:,} rows (1 % pending) to its live table and "
                 "ended months (0078)",
                 await record_upgrade_times(ended, f"{prefix}_record_upgrade"))):
            rows.append((f"{label}: its steps (weak locks)", "s", [up.steps], None, "-"))
            rows.append((f"{label}: the migrations after them (locks held)", "s",
                         [up.prepared], None, "bounded"))
            rows.append((f"{label}: migrate up after them, with functions, lockdown and what "
                         "runs after its commit", "s",
                         [up.locked], None, "-"))
            rows.append((f"{label}: without the steps, one transaction", "s",
                         [up.unprepared], None, "-"))
