"""The scale bench's measurements that change the database (run on a copy, bench/scale.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from aiqueue.answers import AnswerKey
from aiqueue.db.store import queries

SECRET = "bench-secret-0123456789abcdef"
# The tables the claim reads and writes (the state tables, once they exist).
CLAIM_TABLES = ("ai_marking_queue", "ai_marking_ready", "ai_marking_claimed", "ai_marking_fair")
# The record rows' removal is row by row: timed over at most this many of the
# prune's batches of 5,000 (the whole month up to 100,000 rows).
PRUNE_BATCHES = 20


@dataclass(frozen=True)
class Removal:
    """Removing the oldest month: its history and record partitions dropped, then what is
    left of its record rows (in another month's partition) by the prune."""

    rows: int
    record_rows: int  # the record rows of the month's partition the drop removed
    drop_ms: float
    pruned: int  # record rows the prune deleted (at most PRUNE_BATCHES batches)
    prune_ms: float
    dead_before: int
    dead_after_drop: int
    dead_after_prune: int


async def dead_rows(dsn_or_conn: str | asyncpg.Connection) -> int:
    """Dead rows on the claim's tables, from this session's flushed statistics."""
    conn = dsn_or_conn if isinstance(dsn_or_conn, asyncpg.Connection) else \
        await asyncpg.connect(dsn_or_conn)
    try:
        await conn.execute("SELECT pg_stat_force_next_flush(); SELECT pg_stat_clear_snapshot()")
        # A partitioned table's (the record's months) summed over its partitions.
        return int(await conn.fetchval(
            "SELECT coalesce(sum(s.n_dead_tup), 0) FROM unnest($1::text[]) t (name), "
            "LATERAL pg_partition_tree(to_regclass(t.name)) p "
            "JOIN pg_stat_user_tables s ON s.relid = p.relid", list(CLAIM_TABLES)))
    finally:
        if conn is not dsn_or_conn:
            await conn.close()


async def remove_oldest_month(dsn: str) -> Removal:
    conn = await asyncpg.connect(dsn, command_timeout=None)
    try:
        upper: datetime = await conn.fetchval(
            "SELECT upper_bound FROM aiqueue_partitions() WHERE NOT is_default "
            "AND parent = 'ai_marking_results'::regclass ORDER BY upper_bound LIMIT 1")
        rows = int(await conn.fetchval(
            "SELECT count(*) FROM ai_marking_results WHERE applied_at < $1", upper))
        # The history period that puts exactly the oldest month past it.
        keep = (datetime.now(UTC) - upper).total_seconds() - 60
        # The build made a year of live-event months, nearly all empty; in service
        # each leaves a day after its end, on that day's pass.  That pass first
        # (not timed, on a connection of its own: the timed one starts as cold as
        # before) drops them; the timed one drops the oldest month's history alone.
        other = await asyncpg.connect(dsn, command_timeout=None)
        try:
            await other.fetchval("SELECT dropped FROM aiqueue_keep_partitions($1, 0)",
                                 keep + 86400 * 31)
        finally:
            await other.close()
        record_upper: datetime = await conn.fetchval(
            "SELECT upper_bound FROM aiqueue_partitions() WHERE NOT is_default "
            "AND parent = 'ai_marking_queue_ended'::regclass ORDER BY upper_bound LIMIT 1")
        record_rows = int(await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE created_at < $1", record_upper))
        before = await dead_rows(conn)
        started = time.perf_counter()
        # The record's months go when every row is past its period (98_record_months.sql):
        # the same period for completed and ended rows, the history's.
        dropped = await conn.fetchval(
            "SELECT dropped FROM aiqueue_keep_partitions($1, 0, p_completed_seconds => $1,"
            " p_ended_seconds => $1)", keep)
        drop_ms = (time.perf_counter() - started) * 1000
        assert dropped >= 3, dropped
        left = int(await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE created_at < $1", record_upper))
        after_drop = await dead_rows(conn)
        # The record's rows of that month: the prune's bounded batches, each its own
        # statement (its once-a-minute gate opened for each).
        started, pruned = time.perf_counter(), 0
        for _ in range(PRUNE_BATCHES):
            await conn.execute("UPDATE ai_queue_control SET last_prune_at = '-infinity'")
            n = await conn.fetchval(queries()["prune"], keep)
            if not n:
                break
            pruned += n
        prune_ms = (time.perf_counter() - started) * 1000
        return Removal(rows, record_rows - left, drop_ms, pruned, prune_ms, before, after_drop,
                       await dead_rows(conn))
    finally:
        await conn.close()


class _Undo(Exception):
    """Roll a measured statement back."""


async def _timed_and_undone(conn: asyncpg.Connection, sql: str, *args: object,
                            before: str | None = None) -> float:
    try:
        async with conn.transaction():
            if before:
                await conn.execute(before)
            started = time.perf_counter()
            await conn.execute(sql, *args)
            elapsed = (time.perf_counter() - started) * 1000
            raise _Undo
    except _Undo:
        pass
    return elapsed


async def enqueue_vs_bare(dsn: str, repeats: int, ids: int = 10_000) -> list[float]:
    """The enqueue statement of `ids` new submissions beside a bare insert of the same rows
    into the queue table (its indexes, no trigger), each rolled back; their ratios."""
    conn = await asyncpg.connect(dsn, command_timeout=None)
    try:
        subs = [r["id"] for r in await conn.fetch(
            "INSERT INTO submissions (id, assignment_id, content) SELECT gen_random_uuid(), "
            "'bulk', 'answer ' || g FROM generate_series(1, $1) g RETURNING id", ids)]
        key = AnswerKey.derive(SECRET)
        # The enqueue's parameters as bench/db.py's enqueue_breakdown passes them.
        args = (subs, "bulk", 0, "{}", "bulk", False, "mark", "default", None, None,
                key.inner_pad, key.outer_pad, False, "live")
        bare = ("INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id) "
                "SELECT id, 'bulk', gen_random_uuid() FROM unnest($1::uuid[]) id")
        await _timed_and_undone(conn, queries()["enqueue"], *args)  # warm
        ratios = []
        for _ in range(repeats):
            ours = await _timed_and_undone(conn, queries()["enqueue"], *args)
            floor = await _timed_and_undone(
                conn, bare, subs, before="ALTER TABLE ai_marking_queue DISABLE TRIGGER USER")
            ratios.append(ours / floor)
        return ratios
    finally:
        await conn.close()
