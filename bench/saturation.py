"""Saturation: does the queue keep the model busy, and what does a job write?

Two measures (docs/performance.md, "Saturation and physical writes"):
- the span of N jobs that each take S seconds at the function, at in-flight C,
  against the ideal N*S/C (the model never idle while work waits);
- the physical writes of a run of jobs at in-flight 4 (enqueue, claim, result and
  the app's housekeeping together), from PostgreSQL's own statistics: WAL records
  (`pg_stat_wal`, the whole server's: run nothing else beside it), and per table
  (`pg_stat_user_tables`) the tuples inserted, updated, updated HOT and deleted.
  The minimal loop (bench/minimal.py: one insert and two updates of a small row
  per job) is the reference.
During each span, where the settles spend their time: every 20 ms, each running
`aiqueue_settle_many` by its wait event (`pg_stat_activity`; "CPU" when it waits for
nothing), and the tables of the rows other settles queue for (`pg_locks`' tuple locks,
which the first waiter for a row holds).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass

import asyncpg

from bench import loop
from bench.common import Table, fresh_database, middle

_WAL = "SELECT wal_records FROM pg_stat_wal"
# One statement a sample (the sampler's own load stays small beside the run).
_WAITS = ("SELECT coalesce(wait_event_type || '/' || wait_event, 'CPU') AS waits "
          "FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' "
          "AND query LIKE '%aiqueue_settle_many%' AND pid <> pg_backend_pid() "
          "UNION ALL "
          "SELECT 'row of ' || l.relation::regclass::text FROM pg_locks l "
          "JOIN pg_stat_activity a ON a.pid = l.pid "
          "WHERE l.locktype = 'tuple' AND a.datname = current_database() "
          "AND a.query LIKE '%aiqueue_settle_many%'")
_TABLES = ("SELECT relname, n_tup_ins + n_tup_upd + n_tup_del AS written, "
           "n_tup_upd - n_tup_hot_upd AS cold, n_tup_upd AS upd, n_tup_hot_upd AS hot "
           "FROM pg_stat_user_tables")


@dataclass
class Writes:
    wal_records: float      # per job
    cold_updates: float     # non-HOT updates per job, every table together
    tables: int             # tables written during the run
    queue_hot_share: float  # of the queue table's updates, the HOT ones (0..1)
    by_table: dict[str, tuple[int, int]]  # table: (tuples written, non-HOT updates)


async def _snapshot(dsn: str) -> tuple[int, dict[str, tuple[int, int, int, int]]]:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        wal = int(await conn.fetchval(_WAL))
        tables = {r["relname"]: (int(r["written"]), int(r["cold"]), int(r["upd"]), int(r["hot"]))
                  for r in await conn.fetch(_TABLES)}
        return wal, tables
    finally:
        await conn.close()


def _writes(before: tuple[int, dict[str, tuple[int, int, int, int]]],
            after: tuple[int, dict[str, tuple[int, int, int, int]]], jobs: int,
            queue_table: str) -> Writes:
    zero = (0, 0, 0, 0)
    delta = {name: tuple(a - b for a, b in zip(row, before[1].get(name, zero), strict=True))
             for name, row in after[1].items()}
    written = {name: d for name, d in delta.items() if d[0] > 0}
    q = delta.get(queue_table, zero)
    return Writes(
        wal_records=(after[0] - before[0]) / jobs,
        cold_updates=sum(d[1] for d in written.values()) / jobs,
        tables=len(written),
        queue_hot_share=q[3] / q[2] if q[2] else 1.0,
        by_table={name: (d[0], d[1]) for name, d in sorted(written.items())})


async def product_writes(jobs: int, name: str) -> Writes:
    """The product's writes for `jobs` jobs at in-flight 4, instant function."""
    dsn = await fresh_database(name)
    await loop.seed_submissions(dsn, jobs)
    before = await _snapshot(dsn)
    await loop.run_loop(4, jobs, name, dsn=dsn)
    return _writes(before, await _snapshot(dsn), jobs, "ai_marking_queue")


async def minimal_writes(jobs: int, name: str) -> Writes:
    """The minimal loop's writes for the same jobs (its table made before the count)."""
    dsn = await fresh_database(name)
    before = await _snapshot(dsn)
    await loop.run_minimal(4, jobs, name, dsn=dsn)
    return _writes(before, await _snapshot(dsn), jobs, "minimal_jobs")


async def _settle_waits(dsn: str, stop: asyncio.Event) -> Counter[str]:
    """Samples of the running settles by what they wait for, until `stop`."""
    waits: Counter[str] = Counter()
    conn = await asyncpg.connect(dsn)
    try:
        while not stop.is_set():
            waits.update(r["waits"] for r in await conn.fetch(_WAITS))
            await asyncio.sleep(0.02)
    finally:
        await conn.close()
    return waits


async def span(jobs: int, seconds: float, cap: int,
               name: str) -> tuple[float, int, Counter[str]]:
    """Seconds from enqueue to the last result of `jobs` jobs of `seconds` each at `cap`,
    the most the function had at once, and where the settles waited meanwhile."""
    dsn = await fresh_database(name)
    await loop.seed_submissions(dsn, jobs)
    stop = asyncio.Event()
    sampler = asyncio.create_task(_settle_waits(dsn, stop))
    try:
        run = await loop.run_loop(cap, jobs, name, seconds=seconds, dsn=dsn)
    finally:
        stop.set()
        waits = await sampler
    return run.seconds, run.max_in_flight, waits


async def saturation_rows(rows: Table, repeats: int) -> None:
    """The spans against the ideal, then the physical writes, interleaved with the floor."""
    for jobs, seconds, cap in ((400, 0.5, 8), (640, 1.0, 32)):
        ideal = jobs * seconds / cap
        runs = [await span(jobs, seconds, cap, f"bench_sat{cap}_{i}") for i in range(repeats)]
        assert all(m <= cap for _, m, _ in runs), "the cap was exceeded"
        label = f"{jobs} jobs of {seconds:g} s at in-flight {cap}"
        for _, _, waits in runs:
            print(f"where the settles waited, {label} (20 ms samples): "
                  + ", ".join(f"{w} {n}" for w, n in waits.most_common(6)), flush=True)
        rows.append((f"span, {label}", "s", [s for s, _, _ in runs], ideal, f"ideal {ideal:g}"))
        rows.append((f"model kept busy, {label}", "%", [100 * ideal / s for s, _, _ in runs],
                     None, ">= 98"))
    ours, floor = [], []
    for i in range(repeats):
        ours.append(await product_writes(1000, f"bench_writes_{i}"))
        floor.append(await minimal_writes(1000, f"bench_writes_min_{i}"))
    floor_wal = middle(f.wal_records for f in floor)
    rows.append(("WAL records per job, 1,000 jobs at in-flight 4", "records",
                 [w.wal_records for w in ours], floor_wal, "<= 1.5x minimal"))
    rows.append(("minimal loop WAL records per job", "records", [f.wal_records for f in floor],
                 None, "reference"))
    rows.append(("non-HOT updates per job, every table", "updates",
                 [w.cold_updates for w in ours], None, "<= 1"))
    rows.append(("tables written in the run", "tables", [w.tables for w in ours], None, "-"))
    rows.append(("queue table's HOT share of its updates", "%",
                 [100 * w.queue_hot_share for w in ours], None, ">= 90"))
    mid_run = sorted(ours, key=lambda w: w.wal_records)[len(ours) // 2]
    print("tuples written and non-HOT updates per table (the middle run):", flush=True)
    for table, (written, cold) in mid_run.by_table.items():
        print(f"  {table:<32} {written:>8} {cold:>8}", flush=True)
