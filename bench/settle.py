"""One result's settle, alone: the server time of `aiqueue_settle_many` for one result on a
warm connection, and where it goes (each plpgsql function's own time), without HTTP, the
function or the event loop in the way.  The loop bench measures the same figure inside the
whole chain; this one is steady enough to compare two commits on a busy machine."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

import asyncpg

from aiqueue.answers import AnswerKey
from aiqueue.db.gateway import connect_pool
from aiqueue.db.store import Store
from aiqueue.models import Completed, Job
from aiqueue.settings import load_settings
from bench.common import fresh_database

SECRET = "bench-secret-0123456789abcdef"
USAGE = {"prompt_tokens": 900, "completion_tokens": 120, "model": "bench-model"}


@dataclass
class SettleRun:
    settles: int
    server_ms: float  # the settle function's total time per call
    wall_ms: float  # the statement's wall time per call, from the client
    own_ms: dict[str, float] = field(default_factory=dict)  # each function's self time per settle
    calls: dict[str, float] = field(default_factory=dict)  # each function's calls per settle


async def run_settles(name: str, env: dict[str, str], settles: int = 400,
                      cap: int = 1) -> SettleRun:
    """`settles` results settled one by one (each claims the next), `cap` rows in flight,
    with the settings of `env` (QUEUE_* variables, as the loop bench's)."""
    dsn = await fresh_database(name)
    settings = load_settings({"DATABASE_URL": dsn, "MARKING_QUEUE_SECRET": SECRET,
                              "AI_MARKING_FUNCTION_URL": "http://127.0.0.1:9/mark",
                              "QUEUE_MAX_IN_FLIGHT": str(cap), **env}, dev=True)
    plan = settings.claim_plan
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute(f"ALTER DATABASE {await admin.fetchval('SELECT current_database()')}"
                            " SET track_functions = 'pl'")
        ids = [uuid.uuid4() for _ in range(settles + cap + 50)]
        await admin.executemany(
            "INSERT INTO submissions (id, assignment_id, content) VALUES ($1, $2, $3)",
            [(i, f"a{k % 20}", f"answer {k}") for k, i in enumerate(ids)])
    finally:
        await admin.close()
    store = Store(await connect_pool(dsn, max_size=1))
    try:
        for k in range(20):
            # Keyed, as the app keys answers by default (same_answers: mark_once).
            await store.enqueue([i for n, i in enumerate(ids) if n % 20 == k], f"a{k}", 0,
                                {"rubric": "r" * 200}, answer_key=AnswerKey.derive(SECRET))
        flying = [job for job in [await store.claim(plan) for _ in range(cap)] if job]
        taker = uuid.uuid4()

        async def one() -> float:
            job = flying.pop(0)
            started = time.perf_counter()
            [(_, nxt)] = await store.settle(
                [Completed(job.queue_id, job.dispatch_seq, {"score": 1}, USAGE)], plan, taker)
            wall = time.perf_counter() - started
            assert nxt is not None, "the settle claimed nothing"
            flying.append(nxt)
            return wall

        for _ in range(30):  # warm: plans cached, statistics settled
            await one()
        # A session sends its statistics when idle at most once a second: the warm-up's
        # reach the view with the first settle after a second's pause.
        time.sleep(1.1)
        await one()
        before = await _functions(dsn)
        wall = sum([await one() for _ in range(settles)])
    finally:
        await store.close()
    after = await _functions(dsn, wait=True)
    # Per settle: each function's delta over the settle's own calls.
    n = after["aiqueue_settle_many"][0] - before.get("aiqueue_settle_many", (0, 0, 0))[0]
    own = {f: (after[f][2] - before.get(f, (0, 0, 0))[2]) / n for f in after}
    calls = {f: (after[f][0] - before.get(f, (0, 0, 0))[0]) / n for f in after}
    total = (after["aiqueue_settle_many"][1]
             - before.get("aiqueue_settle_many", (0, 0, 0))[1]) / n
    return SettleRun(settles, total, wall * 1000 / settles,
                     {f: v for f, v in own.items() if calls[f] > 0},
                     {f: v for f, v in calls.items() if v > 0})


# The relation locks a backend holds (tables, indexes, sequences, views), and those
# not in its fast-path slots (16 a backend up to PostgreSQL 17): those go through the
# shared lock table, under a partition lock every backend contends for.
# One row per relation and mode; pg_locks' own lock left out.
_LOCKS = ("SELECT count(*) AS held, count(*) FILTER (WHERE NOT fastpath) AS slow, "
          "count(DISTINCT relation) AS relations, "
          "coalesce(string_agg(DISTINCT relation::regclass::text, ', ')"
          " FILTER (WHERE NOT fastpath), '') AS slow_names "
          "FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'relation'"
          " AND relation <> 'pg_locks'::regclass")


@dataclass
class SettleLocks:
    held: float  # relation locks (relation and mode) a settle holds at its end, per settle
    slow: float  # of them, off the fast path
    relations: float  # the relations they name
    names: str  # the relations off the fast path (the last settle)


async def settle_locks(name: str, env: dict[str, str], settles: int = 20) -> SettleLocks:
    """The relation locks one settle holds just before its commit (pg_locks), each settle in
    a transaction of its own on one connection, as the store runs it."""
    dsn = await fresh_database(name)
    settings = load_settings({"DATABASE_URL": dsn, "MARKING_QUEUE_SECRET": SECRET,
                              "AI_MARKING_FUNCTION_URL": "http://127.0.0.1:9/mark", **env},
                             dev=True)
    plan = settings.claim_plan
    conn = await asyncpg.connect(dsn)
    store = Store(await connect_pool(dsn, max_size=1))
    try:
        ids = [uuid.uuid4() for _ in range(settles + 10)]
        await conn.executemany(
            "INSERT INTO submissions (id, assignment_id, content) VALUES ($1, 'a1', $2)",
            [(i, f"answer {k}") for k, i in enumerate(ids)])
        await store.enqueue(ids, "a1", 0, {"rubric": "r" * 200})
        job = await store.claim(plan)
        taker = uuid.uuid4()
        held = slow = relations = 0
        names = ""
        for _ in range(settles):
            assert job is not None, "the settle claimed nothing"
            async with conn.transaction():
                row = await conn.fetchrow(
                    "SELECT * FROM aiqueue_settle_many($1::jsonb, $2::jsonb, $3::uuid)",
                    Completed.items_json([Completed(job.queue_id, job.dispatch_seq,
                                                    {"score": 1}, USAGE)]), plan.json, taker)
                locks = await conn.fetchrow(_LOCKS)
            assert row is not None and locks is not None
            held, slow, names = held + locks["held"], slow + locks["slow"], locks["slow_names"]
            relations += locks["relations"]
            job = Job.from_row(row) if row["queue_id"] else None
    finally:
        await store.close()
        await conn.close()
    return SettleLocks(held / settles, slow / settles, relations / settles, names)


async def _functions(dsn: str, wait: bool = False) -> dict[str, tuple[float, float, float]]:
    """Each plpgsql function's calls, total and self time (ms)."""
    if wait:
        time.sleep(0.6)  # the closed sessions flush their statistics
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = await conn.fetch("SELECT funcname, sum(calls) AS calls, sum(total_time) AS total, "
                                "sum(self_time) AS self FROM pg_stat_user_functions "
                                "GROUP BY funcname")
    finally:
        await conn.close()
    return {r["funcname"]: (float(r["calls"]), float(r["total"]), float(r["self"]))
            for r in rows}


def report(run: SettleRun, top: int = 25) -> str:
    lines = [f"settle: {run.server_ms:.3f} ms server, {run.wall_ms:.3f} ms wall, "
             f"{sum(run.calls.values()):.1f} plpgsql calls per settle"]
    for f, ms in sorted(run.own_ms.items(), key=lambda x: -x[1])[:top]:
        lines.append(f"  {ms * 1000:8.1f} us own  {run.calls[f]:5.2f} calls  {f}")
    return "\n".join(lines)


if __name__ == "__main__":
    import asyncio
    import sys

    from bench.__main__ import MONEY_ENV

    money = "--money" in sys.argv
    result = asyncio.run(run_settles("bench_settle_" + ("money" if money else "plain"),
                                     MONEY_ENV if money else {}))
    print(report(result))
    locks = asyncio.run(settle_locks("bench_settle_locks", MONEY_ENV if money else {}))
    print(f"relation locks per settle: {locks.held:.1f} on {locks.relations:.1f} relations, "
          f"off the fast path {locks.slow:.1f} ({locks.names or 'none'})")
