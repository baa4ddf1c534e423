"""The provider's prompt cache (docs/prompt-cache.md): both scenarios against today's order, and the
claim with the cache's locality at a large backlog.

The scenarios run against the model emulator of bench/cache_model.py (a mark of
0.4 s; an entry life of 15 s, then 6 s), once with the pool scheduling for the
cache and once as before (ttl_seconds = 0): cost, hit rate, fairness and time.
"""

from __future__ import annotations

import json
import time

import asyncpg

from aiqueue.db.store import Store, connect_pool
from bench.cache_model import Figures, Scenario, measure
from bench.common import READY_ROWS, Row, fresh_database
from bench.db import _ms, _Undo, seed_queue

SCENARIOS = (
    ("3 classes of 30, in-flight 8, 15 s entries", Scenario(classes=3, rows=30, cap=8, ttl=15.0)),
    ("60 classes of 4, in-flight 2, 6 s entries", Scenario(classes=60, rows=4, cap=2, ttl=6.0)),
)


async def scenario(s: Scenario, name: str) -> Figures:
    dsn = await fresh_database(name)
    store = Store(await connect_pool(dsn, max_size=10))
    conn = await asyncpg.connect(dsn)
    try:
        return await measure(store, conn, s)
    finally:
        await conn.close()
        await store.close()


async def scenario_rows(rows: list[Row], repeats: int) -> None:
    for label, s in SCENARIOS:
        ours: list[Figures] = []
        today: list[Figures] = []
        for i in range(repeats):
            ours.append(await scenario(s, f"bench_cache_{s.classes}_{i}"))
            today.append(await scenario(Scenario(**{**s.__dict__, "queue_ttl": 0.0}),
                                        f"bench_cache_{s.classes}_today_{i}"))
        first = s.cap == 8
        figures = (
            ("later rows reading the prefix", "%", lambda f: f.hit_rate * 100,
             ">= 90" if first else ">= 80"),
            ("writes of one prefix (most)", "writes", lambda f: f.max_writes,
             "<= 1" if first else "-"),
            ("cost / uncached", "%", lambda f: f.cost_share * 100, "<= 60" if first else "-"),
            ("billed share while all wait, off even (most)", "pp", _unevenness, "<= 5"),
            ("last mark", "s", lambda f: f.last_mark, f"<= today's + {s.mark}"),
            ("places a class starts after its own (most)", "classes", lambda f: f.start_lag,
             "<= 3"))
        print(f"\n{label}", flush=True)
        for name, unit, value, target in figures:
            if name.startswith("billed share") and not first:
                continue  # 60 classes never all wait once the first is done
            rows.append((f"{label}: {name}", unit, [value(f) for f in ours], None, target))
            rows.append((f"{label}: {name}, today's order", unit, [value(f) for f in today],
                         None, "reference"))


def _unevenness(f: Figures) -> float:
    even = 100 / len(f.shares)
    return max(abs(v * 100 - even) for v in f.shares.values())


async def seed_prefixes(dsn: str) -> None:
    """Each of the seeded queue's groups gets its own 2,000-token payload; a third of the
    prefixes are hot (their groups warm), a third warming, a third cold."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("ALTER TABLE ai_marking_queue DISABLE TRIGGER USER")
        await conn.execute(
            "INSERT INTO ai_marking_payloads (sha256, payload) "
            "SELECT sha256(convert_to(d::text, 'UTF8')), d FROM ("
            "  SELECT jsonb_build_object('a', 'a' || g, 'rubric', repeat('r', 8000)) AS d "
            "  FROM generate_series(0, 999) g) x")
        await conn.execute(
            "UPDATE ai_marking_queue q SET payload_id = p.id FROM ai_marking_payloads p "
            "WHERE p.payload ->> 'a' = q.assignment_id")
        await conn.execute(
            "INSERT INTO ai_marking_prefixes (pool, payload_id, tokens, answered_at, "
            "                                 dispatched_at, warming_at) "
            "SELECT 'default', p.id, 2000, CASE WHEN p.id % 3 = 0 THEN now() END, now(), "
            "       CASE WHEN p.id % 3 = 1 THEN now() END "
            "FROM ai_marking_payloads p WHERE p.id % 3 <> 2")
        await conn.execute(
            "UPDATE ai_marking_fair f SET warm_until = now() + interval '270 seconds' "
            "FROM ai_marking_payloads p WHERE p.payload ->> 'a' = f.group_key AND p.id % 3 = 0")
        await conn.execute(READY_ROWS)
        await conn.execute("ALTER TABLE ai_marking_queue ENABLE TRIGGER USER")
        await conn.execute("VACUUM ANALYZE ai_marking_queue")
        await conn.execute("VACUUM ANALYZE ai_marking_fair")
    finally:
        await conn.close()


PLAN = json.dumps({"pools": [{"name": "default", "cap": 8, "tpm": 0, "rpm": 0,
                              "cache": {"ttl": 300, "min": 1024, "quantum": None,
                                        "key_rpm": None}}],
                   "kinds": [{"name": "mark", "pool": "default", "cap": 0}]})


async def claim_at_scale(dsn: str, repeats: int) -> tuple[list[float], list[float]]:
    """Server time of the claim's choice with the cache's locality and warm-up
    (aiqueue_fair_pick with the plan's cache; rolled back), and wall time of a claim."""
    conn = await asyncpg.connect(dsn, statement_cache_size=0)
    pick = "SELECT * FROM aiqueue_fair_pick(ARRAY['mark'], $1::jsonb, NULL)"
    try:
        server, wall = [], []
        for i in range(repeats + 1):
            try:
                async with conn.transaction():
                    plan = [r[0] for r in await conn.fetch("EXPLAIN (ANALYZE) " + pick.replace(
                        "$1::jsonb", f"'{PLAN}'::jsonb"))]
                    started = time.perf_counter()
                    await conn.fetchrow(pick, PLAN)
                    took = (time.perf_counter() - started) * 1000
                    raise _Undo
            except _Undo:
                pass
            if i > 0:  # the first warms the function's plans, as a pooled connection has them
                server.append(_ms(plan, "Planning Time") + _ms(plan, "Execution Time"))
                wall.append(took)
        return server, wall
    finally:
        await conn.close()


async def claim_rows(rows: list[Row], repeats: int, big: int) -> None:
    dsn = await fresh_database("bench_cache_pending")
    await seed_queue(dsn, big, "pending", groups=1000)
    await seed_prefixes(dsn)
    server, wall = await claim_at_scale(dsn, max(repeats, 5))
    rows.append((f"claim at {big:,} pending, 1,000 groups, VTC + cache locality (server)", "ms",
                 server, None, "<= 0.5"))
    rows.append((f"claim at {big:,} pending, 1,000 groups, VTC + cache locality (wall)", "ms",
                 wall, None, "-"))


async def cache_rows(rows: list[Row], repeats: int, big: int) -> None:
    """Issue 40's figures: both scenarios against today's order, then the claim at scale."""
    await scenario_rows(rows, repeats)
    await claim_rows(rows, repeats, big)
