"""Database-side figures: enqueue of 10,000 ids, claim and stats at 1,000,000 rows."""

from __future__ import annotations

import re
import time

import asyncpg
import httpx

from aiqueue.answers import AnswerKey
from aiqueue.db.store import queries
from bench.common import READY_ROWS, free_port, fresh_database, spawn, wait_http
from tests.plans import plan_of

SECRET = "bench-secret-0123456789abcdef"


async def seed_submissions(dsn: str, n: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO submissions (id, assignment_id, content) "
            "SELECT gen_random_uuid(), 'bulk', 'answer ' || g FROM generate_series(1, $1) g", n)
    finally:
        await conn.close()


async def seed_queue(dsn: str, n: int, status: str, groups: int = 500) -> None:
    """n submissions with one queue row each in `status` (finished ones spread over 7 days),
    spread over `groups` assignments, each row with its turn in its group."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("ALTER TABLE ai_marking_queue DISABLE TRIGGER USER")
        await conn.execute(
            "INSERT INTO submissions (id, assignment_id, content) "
            "SELECT gen_random_uuid(), 'a' || (g % $2), 'answer' FROM generate_series(1, $1) g",
            n, groups)
        await conn.execute(
            """
            INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status, attempts,
                created_at, updated_at, started_at, finished_at, run_after, turn)
            SELECT s.id, s.assignment_id, gen_random_uuid(), $1, 1,
                   now() - (random() * interval '7 days'), now(), now() - interval '5 seconds',
                   CASE WHEN $1 IN ('completed', 'failed')
                        THEN now() - (random() * interval '7 days') END,
                   now() - interval '1 second',
                   row_number() OVER (PARTITION BY s.assignment_id)
            FROM submissions s WHERE s.assignment_id <> 'bulk'
            """, status)
        await conn.execute(
            "INSERT INTO ai_marking_groups (priority, group_key, last_turn) "
            "SELECT 0, assignment_id, max(turn) FROM ai_marking_queue GROUP BY assignment_id")
        # Turns by tokens (aiqueue 0022): every group with pending rows waits, with
        # counters spread as after a while of service (the triggers were off). Only
        # pending rows wait (the upgrade bench seeds ended rows on an older schema).
        if status == "pending":
            await conn.execute(
                "INSERT INTO ai_marking_fair (pool, priority, group_key, counter, waiting, "
                "                             head_turn, head_seq, walk_key, walk_turn, walk_seq) "
                "SELECT 'default', 0, g, c, true, t, s, c, t, s "
                "FROM (SELECT DISTINCT ON (assignment_id) assignment_id AS g, "
                "             random() * 1000000 AS c, turn AS t, seq AS s "
                "      FROM ai_marking_queue WHERE status = 'pending' "
                "      ORDER BY assignment_id, turn, seq) x")
        await conn.execute(READY_ROWS)
        await conn.execute("ALTER TABLE ai_marking_queue ENABLE TRIGGER USER")
        await conn.execute("VACUUM ANALYZE ai_marking_queue")
        await conn.execute("VACUUM ANALYZE submissions")
    finally:
        await conn.close()


async def enqueue_time(existing_rows: int, name: str, ids: int = 10_000,
                       payload: dict[str, object] | None = None) -> float:
    """Seconds from sending an enqueue of `ids` ids (with `payload`) to its 202, over HTTP."""
    dsn = await fresh_database(name)
    if existing_rows:
        await seed_queue(dsn, existing_rows, "completed")
    await seed_submissions(dsn, ids)
    conn = await asyncpg.connect(dsn)
    rows = await conn.fetch("SELECT id FROM submissions WHERE assignment_id = 'bulk'")
    await conn.close()
    port = free_port()
    app = spawn(["-m", "aiqueue", "serve", "--port", str(port)], env={
        "DATABASE_URL": dsn, "MARKING_QUEUE_SECRET": SECRET, "QUEUE_TICK_SECONDS": "0",
        "AI_MARKING_FUNCTION_URL": "http://127.0.0.1:9/unreachable",
        "QUEUE_MAX_IN_FLIGHT": "1"})
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        body: dict[str, object] = {"assignment_id": "bulk",
                                   "submission_ids": [str(r["id"]) for r in rows]}
        if payload is not None:
            body["payload"] = payload
        async with httpx.AsyncClient(timeout=60) as client:
            # Warm the connection and the server's plan caches with a small batch first.
            await client.post(f"http://127.0.0.1:{port}/api/marking/enqueue",
                              headers={"authorization": f"Bearer {SECRET}"},
                              json={"assignment_id": "warm", "submission_ids":
                                    [str(rows[0]["id"])]})
            started = time.perf_counter()
            r = await client.post(f"http://127.0.0.1:{port}/api/marking/enqueue",
                                  headers={"authorization": f"Bearer {SECRET}"}, json=body)
            elapsed = time.perf_counter() - started
        assert r.status_code == 202 and r.json()["enqueued"] == ids - 1, r.text
        return elapsed
    finally:
        app.terminate()
        app.wait(10)


async def enqueue_breakdown(dsn: str, ids: int = 10_000) -> dict[str, float]:
    """Where an enqueue's database time goes: EXPLAIN ANALYZE of the statement on an
    empty queue (after one warm-up run) for its triggers' shares; then, each timed from
    the client on an empty queue: the statement, a bare insert of the same rows into the
    queue table (its indexes and foreign key, none of the enqueue's work: no lookups,
    turns, keys, payload, triggers), and a bare insert into a table with only a uuid
    primary key (the floor of writing 10,000 rows at all)."""
    await seed_submissions(dsn, ids)
    conn = await asyncpg.connect(dsn)
    try:
        subs = [r["id"] for r in await conn.fetch("SELECT id FROM submissions")]
        # Kind mark in the default pool; no not_before, no expiry; the answers keyed, as
        # the app's default (same_answers: mark_once) keys them.
        key = AnswerKey.derive(SECRET)
        args = (subs, "bulk", 0, "{}", "bulk", False, "mark", "default", None, None,
                key.inner_pad, key.outer_pad, False, "live")
        empty = "TRUNCATE ai_marking_queue, ai_marking_events, ai_marking_groups CASCADE"
        await conn.fetch(queries()["enqueue"], *args)
        await conn.execute(empty)
        plan = [r[0] for r in await conn.fetch(
            "EXPLAIN (ANALYZE) " + queries()["enqueue"], *args)]
        await conn.execute(empty)
        statement = await _timed(conn, queries()["enqueue"], *args)
        await conn.execute(empty)
        await conn.execute("ALTER TABLE ai_marking_queue DISABLE TRIGGER USER")
        same_rows = await _timed(
            conn, "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id) "
                  "SELECT id, 'bulk', gen_random_uuid() FROM unnest($1::uuid[]) id", subs)
        await conn.execute(READY_ROWS)
        await conn.execute("ALTER TABLE ai_marking_queue ENABLE TRIGGER USER")
        await conn.execute("CREATE TABLE bench_bare (id uuid PRIMARY KEY DEFAULT "
                           "gen_random_uuid(), submission_id uuid, assignment_id text)")
        bare = await _timed(conn, "INSERT INTO bench_bare (submission_id, assignment_id) "
                                  "SELECT id, 'bulk' FROM unnest($1::uuid[]) id", subs)
    finally:
        await conn.close()
    trigger = r"Trigger (?:for constraint )?{}.*time=([0-9.]+)"
    return {"explained": _ms(plan, "Execution Time"),
            "fk": _plan_number(plan, trigger.format("ai_marking_queue_submission_id_fkey")),
            "feed": _plan_number(plan, trigger.format("ai_marking_queue_events_ins")),
            "statement": statement, "same_rows": same_rows, "bare": bare}


async def _timed(conn: asyncpg.Connection, sql: str, *args: object) -> float:
    """Milliseconds one statement takes, from the client."""
    started = time.perf_counter()
    await conn.execute(sql, *args)
    return (time.perf_counter() - started) * 1000


def _plan_number(plan: list[str], pattern: str) -> float:
    """The number the first plan line matching `pattern` captures."""
    for line in plan:
        m = re.search(pattern, line)
        if m:
            return float(m.group(1))
    raise ValueError(f"nothing in the plan matches {pattern!r}")


def _blocks_read(plan: list[str]) -> int:
    """Blocks read from outside the server's buffers by the plan's top node (a function's
    node counts what its statements read)."""
    line = next((x for x in plan if "Buffers:" in x), "")
    m = re.search(r"read=(\d+)", line)
    return int(m.group(1)) if m else 0


def _ms(plan: list[str], label: str) -> float:
    return _plan_number(plan, rf"{label}: ([0-9.]+) ms")


class _Undo(Exception):
    """Roll a measured transaction back."""


# The claim's relations read once through PostgreSQL's buffers, as a district's server holds
# them (its pending rows were written by their enqueue, and every claim reads them): the ready
# table by each of its indexes, and the record's and submissions' rows of the pending ones by
# their keys.  Index scans, one process: a sequential scan of a table larger than a quarter of
# shared_buffers reads through a small ring of buffers and would leave them cold.
_WARM = (
    "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; "
    "SET LOCAL enable_sort = off; SET LOCAL enable_hashjoin = off; "
    "SET LOCAL enable_mergejoin = off; SET LOCAL max_parallel_workers_per_gather = 0",
    "SELECT count(*) FROM ai_marking_fair",
    "SELECT count(h.queue_id) FROM (SELECT queue_id FROM ai_marking_ready "
    "ORDER BY pool, priority, grp, kind, turn, seq) h",
    "SELECT count(*) FROM (SELECT 1 FROM ai_marking_ready ORDER BY pool, priority, grp, turn, "
    "seq) h",
    "SELECT count(*) FROM (SELECT 1 FROM ai_marking_ready ORDER BY -priority, turn, seq) h",
    "SELECT count(s.content) FROM ai_marking_ready h "
    "JOIN ai_marking_queue_live q ON q.queue_id = h.queue_id "
    "JOIN submissions s ON s.id = q.submission_id",
)


async def warm_claim(conn: asyncpg.Connection) -> None:
    """Read the claim's relations into the server's buffers (there is no pg_prewarm in the
    embedded PostgreSQL)."""
    async with conn.transaction():
        for statement in _WARM:
            await conn.execute(statement)


async def claim_at_scale(dsn: str, repeats: int,
                         reads: list[int] | None = None) -> tuple[list[float], list[float]]:
    """Server time of the claim's choice (aiqueue_fair_pick: the walk of the waiting groups
    by counter, the chosen group's first row, its charge; rolled back) and wall time per
    claim, on a warm connection, after its relations were read into the server's buffers.
    `reads`, when given, gets the blocks each choice read from outside those buffers."""
    conn = await asyncpg.connect(dsn, statement_cache_size=0, command_timeout=None)
    try:
        await warm_claim(conn)
        server, wall = [], []
        # A pooled connection has the function's plans cached: measure it warm.  A
        # statement's plan settles after its first five runs (PostgreSQL's plan cache
        # plans each of them for its parameters before it compares a generic plan).
        for _ in range(6):
            try:
                async with conn.transaction():
                    await conn.fetch(
                        "SELECT * FROM aiqueue_fair_pick(ARRAY['mark'], NULL, NULL)")
                    raise _Undo
            except _Undo:
                pass
        for _ in range(repeats):
            try:
                async with conn.transaction():
                    plan = [r[0] for r in await conn.fetch(
                        "EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM "
                        "aiqueue_fair_pick(ARRAY['mark'], NULL, NULL)")]
                    raise _Undo
            except _Undo:
                pass
            server.append(_ms(plan, "Planning Time") + _ms(plan, "Execution Time"))
            if reads is not None:
                reads.append(_blocks_read(plan))
            started = time.perf_counter()
            # No budget, the default pool unlimited, no caps.
            row = await conn.fetchrow(queries()["claim"], plan_of(0, 5).json)
            wall.append((time.perf_counter() - started) * 1000)
            assert row is not None
        return server, wall
    finally:
        await conn.close()


async def stats_and_page_at_scale(dsn: str, repeats: int) -> tuple[list[float], list[float]]:
    """Server time of the stats query plus the first queue page; and of a plain count(*)."""
    conn = await asyncpg.connect(dsn, statement_cache_size=0)
    q = queries()
    try:
        ours, plain = [], []
        for _ in range(repeats):
            total = 0.0
            for sql, args in ((q["stats"], (None, "UTC")),
                              (q["list_rows"], (None, None, None, None, 50, 0, None, None)),
                              (q["count_rows"], (None, None, None, None))):
                plan = [r[0] for r in await conn.fetch("EXPLAIN (ANALYZE) " + sql, *args)]
                total += _ms(plan, "Planning Time") + _ms(plan, "Execution Time")
            ours.append(total)
            plan = [r[0] for r in await conn.fetch(
                "EXPLAIN (ANALYZE) SELECT count(*) FROM ai_marking_queue")]
            plain.append(_ms(plan, "Planning Time") + _ms(plan, "Execution Time"))
        return ours, plain
    finally:
        await conn.close()
