"""The queue list with each filter the API and /ai-queue offer reads about one page of
rows, not every row of an assignment or a phase (migration 0072; docs/performance.md,
"A year of a district")."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import pytest

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Status

pytestmark = pytest.mark.fresh_db

# 60,000 rows over 40 assignments (1,500 each): mostly completed, a few failed and
# pending, none cancelled or expired; hw-rare has 3 completed rows and a group of its own.
SEED = """
INSERT INTO submissions (id, assignment_id, content)
SELECT gen_random_uuid(), 'hw-' || (g % 40), 'x' FROM generate_series(1, 60000) g;
INSERT INTO submissions (id, assignment_id, content)
SELECT gen_random_uuid(), 'hw-rare', 'x' FROM generate_series(1, 3);
INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status, attempts,
    created_at, started_at, finished_at, group_key)
SELECT s.id, s.assignment_id, gen_random_uuid(),
       CASE WHEN s.assignment_id = 'hw-rare' THEN 'completed'
            WHEN g % 100 = 0 THEN 'failed' WHEN g % 50 = 1 THEN 'pending'
            ELSE 'completed' END, 1,
       now() - g * interval '10 s', now() - g * interval '10 s',
       CASE WHEN g % 50 = 1 AND s.assignment_id <> 'hw-rare' THEN NULL
            ELSE now() - g * interval '10 s' + interval '3 s' END,
       CASE WHEN s.assignment_id = 'hw-rare' THEN 'team-rare' END
FROM (SELECT id, assignment_id, row_number() OVER () AS g FROM submissions) s;
"""
PAGE = 50
# A page's rows from each of five phases, the rows in flight, the page's own rows
# again for their columns: a few hundred at most.  Before 0072 an assignment's
# empty phase read its 1,500 rows, and a group's walk read the whole phase.
MOST = 600


def queue_rows_read(node: dict[str, Any]) -> int:
    """Rows the plan's scans of ai_marking_queue read (kept or filtered out), all loops."""
    own = 0
    if node.get("Relation Name") == "ai_marking_queue":
        assert not node["Node Type"].startswith("Seq"), node["Node Type"]
        loops = int(node.get("Actual Loops", 1))
        own = loops * int(node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
                          + node.get("Rows Removed by Index Recheck", 0))
    return own + sum(queue_rows_read(child) for child in node.get("Plans", []))


async def read(conn: asyncpg.Connection, statement: str, *args: object) -> int:
    plan = json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", *args))
    return queue_rows_read(plan[0]["Plan"])


async def test_each_filter_of_the_list_reads_about_a_page(db_url: str,
                                                          conn: asyncpg.Connection) -> None:
    await conn.execute(SEED)
    await conn.execute("VACUUM ANALYZE ai_marking_queue")
    store = Store(await connect_pool(db_url, max_size=2))
    sql = store.sql
    await store.close()
    # (status, assignment, group, kind): list_rows's and count_rows's filters.
    filters: list[tuple[Status | None, str | None, str | None, str | None]] = [
        (None, "hw-7", None, None), (None, "hw-rare", None, None),
        (None, None, "hw-7", None), (None, None, "team-rare", None),
        (None, "hw-7", None, "mark")]
    every: tuple[Status, ...] = ("pending", "processing", "completed", "failed", "cancelled",
                                 "expired")
    filters += [(s, "hw-7", None, None) for s in every]
    filters += [(s, None, "hw-7", None) for s in every if s in ("pending", "failed",
                                                                 "cancelled")]
    for status, assignment, group, kind in filters:
        n = await read(conn, sql["list_rows"], status, assignment, None, None, PAGE, 0, group,
                       kind)
        assert n <= MOST, ("list_rows", status, assignment, group, kind, n)
        # A later page by keyset: the same ranges from the cursor.
        at = await conn.fetchval("SELECT now() - interval '2 days'")
        n = await read(conn, sql["list_rows"], status, assignment, at,
                       "ffffffff-ffff-ffff-ffff-ffffffffffff", PAGE, 0, group, kind)
        assert n <= MOST, ("list_rows after", status, assignment, group, kind, n)
    # The count of an assignment or a group: its rows (1,500 here), an ended
    # status only its phase's.
    assert await read(conn, sql["count_rows"], None, "hw-7", None, None) <= 1_600
    assert await read(conn, sql["count_rows"], "failed", "hw-7", None, None) <= 100
    assert await read(conn, sql["count_rows"], None, None, "team-rare", None) <= 10
    assert await read(conn, sql["count_rows"], "cancelled", None, "hw-7", None) == 0


async def test_the_lists_answers_are_those_of_a_plain_filter(db_url: str,
                                                             conn: asyncpg.Connection) -> None:
    await conn.execute(SEED)
    store = Store(await connect_pool(db_url, max_size=2))
    try:
        cases: list[tuple[Status | None, str | None, str | None]] = [
            (None, "hw-rare", None), (None, None, "team-rare"),
                                          ("failed", "hw-3", None), ("pending", None, "hw-3"),
            (None, "hw-3", None)]
        for status, assignment, group in cases:
            rows = await store.list_rows(status=status, assignment_id=assignment, limit=PAGE,
                                         group=group)
            want = await conn.fetch(
                "SELECT queue_id FROM ai_marking_queue WHERE ($1::text IS NULL OR status = $1)"
                " AND ($2::text IS NULL OR assignment_id = $2)"
                " AND ($3::text IS NULL OR coalesce(group_key, assignment_id) = $3)"
                " ORDER BY created_at DESC, queue_id DESC LIMIT $4",
                status, assignment, group, PAGE)
            assert [r.queue_id for r in rows] == [w["queue_id"] for w in want]
            total = await store.count_rows(status=status, assignment_id=assignment, group=group)
            assert total == await conn.fetchval(
                "SELECT count(*) FROM ai_marking_queue WHERE ($1::text IS NULL OR status = $1)"
                " AND ($2::text IS NULL OR assignment_id = $2)"
                " AND ($3::text IS NULL OR coalesce(group_key, assignment_id) = $3)",
                status, assignment, group)
    finally:
        await store.close()
