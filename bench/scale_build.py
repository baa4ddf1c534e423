"""The scale bench's database (bench/scale.py), built once with set-based SQL.

Month partitions from 13 months ago to next month, the record's ended rows'
too (the upgrade's catch-all for older rows is empty here and dropped first);
`ended` completed rows, a tenth in the oldest month and the rest spread evenly
since, each with one attempt and one result; the last day's live events;
`pending` pending rows with their turns and their groups' fair-walk rows, as
after a while of service.  The queue's triggers are off while it loads, so the
counts are written at the end.

Loading fast (10,000,000 rows on 2 cores): the tables' indexes that back no
constraint are dropped during the load and built after it (one sort each
instead of millions of random inserts); keys and triggers are not checked while
it loads (session_replication_role = replica: the rows are made consistent);
ids are made in time order (v7-like uuids), so each primary key grows at its
end and each heap stays in the order a year of service would leave it.
"""

from __future__ import annotations

import time

import asyncpg

from bench.common import READY_ROWS

MONTHS = 13

_PARTITIONS = """
DO $$
DECLARE x record;
BEGIN
    FOR x IN SELECT parent, part FROM aiqueue_partitions() WHERE lower_bound IS NULL
                                                           AND NOT is_default LOOP
        EXECUTE format('ALTER TABLE %s DETACH PARTITION %s', x.parent, x.part);
        EXECUTE format('DROP TABLE %s', x.part);
    END LOOP;
END $$;
SELECT count(*) FILTER (WHERE aiqueue_partition_add(p.parent, p.key_column, p.unique_column, m))
FROM aiqueue_partitioned() p,
     generate_series(date_trunc('month', now() AT TIME ZONE 'UTC') - interval '13 months',
                     date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month',
                     interval '1 month') m;
"""

# g: 1..ended are ended rows (g <= ended / 10 in the oldest month), the rest pending.
# Ids in g's order: the first 12 hex digits count, the rest are random.  Every
# insert below reads its source in the order it was written (a fresh table's
# scan), which is g's: no sort is needed to keep the keys growing at their end.
_SUBJECTS = """
CREATE UNLOGGED TABLE bench_subjects AS
SELECT g, (lpad(to_hex(g), 12, '0') || substr(md5(random()::text), 1, 20))::uuid AS id,
       (lpad(to_hex(g), 12, '0') || substr(md5(random()::text), 1, 20))::uuid AS queue_id,
       'a' || (g % $3::integer) AS assignment_id,
       CASE WHEN g > $1::bigint THEN NULL
            WHEN g <= $1::bigint / 10 THEN m0 + ((g - 1)::float8 / ($1::bigint / 10)) * (m1 - m0)
            ELSE m1 + ((g - $1::bigint / 10)::float8 / ($1::bigint - $1::bigint / 10))
                      * (now() - m1) END AS finished
FROM generate_series(1, $1::bigint + $2::bigint) g,
     LATERAL (SELECT (date_trunc('month', now() AT TIME ZONE 'UTC') - interval '13 months')
                     AT TIME ZONE 'UTC' AS m0,
                     (date_trunc('month', now() AT TIME ZONE 'UTC') - interval '12 months')
                     AT TIME ZONE 'UTC' AS m1) b;
INSERT INTO submissions (id, assignment_id, content)
SELECT id, assignment_id, 'answer ' || g FROM bench_subjects;
"""

_ROWS = """
INSERT INTO ai_marking_queue (queue_id, submission_id, assignment_id, run_id, status, attempts,
    dispatch_seq, created_at, updated_at, started_at, finished_at, run_after, turn)
SELECT queue_id, id, assignment_id, gen_random_uuid(),
       CASE WHEN finished IS NULL THEN 'pending' ELSE 'completed' END,
       CASE WHEN finished IS NULL THEN 0 ELSE 1 END, CASE WHEN finished IS NULL THEN 0 ELSE 1 END,
       coalesce(finished - interval '40 s', now() - interval '1 hour'),
       coalesce(finished, now() - interval '1 hour'), finished - interval '30 s', finished,
       coalesce(finished - interval '40 s', now() - interval '1 second'), g / $1::integer + 1
FROM bench_subjects;
"""

_HISTORY = """
INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt, started_at, ended_at,
                                 outcome, usage)
SELECT queue_id, 1, 1, started_at, finished_at, 'completed',
       '{"model": "bench-model", "prompt_tokens": 800, "completion_tokens": 160}'::jsonb
FROM ai_marking_queue WHERE status = 'completed';
INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, run_id, applied_at,
                                result, model, prompt_tokens, completion_tokens, cost_usd,
                                processing_seconds)
SELECT queue_id, submission_id, assignment_id, run_id, finished_at,
       '{"score": 3, "max_score": 5, "feedback": "A clear answer; name the second cause."}',
       'bench-model', 800, 160, 0.0004, 30
FROM ai_marking_queue WHERE status = 'completed';
INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, created_at)
SELECT assignment_id, queue_id, submission_id, 'completed', finished_at
FROM ai_marking_queue WHERE status = 'completed' AND finished_at > now() - interval '1 day';
"""

_GROUPS = """
INSERT INTO ai_marking_groups (priority, group_key, last_turn)
SELECT 0, assignment_id, max(turn) FROM ai_marking_queue GROUP BY assignment_id;
INSERT INTO ai_marking_fair (pool, priority, group_key, counter, waiting, head_turn, head_seq,
                             walk_key, walk_turn, walk_seq)
SELECT pool, priority, group_key, counter, waiting, head_turn, head_seq, counter, head_turn,
       head_seq
FROM (SELECT DISTINCT ON (assignment_id) 'default' AS pool, 0 AS priority,
             assignment_id AS group_key, random() * 1000000 AS counter, true AS waiting,
             turn AS head_turn, seq AS head_seq
      FROM ai_marking_queue WHERE status = 'pending' ORDER BY assignment_id, turn, seq) g;
INSERT INTO ai_marking_counts (status, kind, pool, month, n)
SELECT status, kind, pool, aiqueue_count_month(created_at), count(*) FROM ai_marking_queue
GROUP BY status, kind, pool, aiqueue_count_month(created_at);
DROP TABLE bench_subjects;
SELECT count(*) FROM (SELECT aiqueue_usage_roll(1e9, 10000)) r;
CREATE TABLE bench_scale_built (ended bigint, pending bigint, built_at timestamptz);
"""


# A year of results has taught every assignment its estimate (47_estimate.sql), which the
# claim's charge reads (without one it falls back to its pool's recent ones).  Also run on
# a database kept from before this was built in (bench/scale.py).
ESTIMATES = """
INSERT INTO ai_marking_estimates (pool, assignment_id, prompt_tokens, completion_tokens,
                                  cost_usd, model, samples)
SELECT 'default', group_key, 800, 160, 0.0004, 'bench-model', 20 FROM ai_marking_groups
ON CONFLICT (pool, assignment_id) DO NOTHING
"""


async def built(dsn: str, ended: int, pending: int) -> bool:
    """Whether the database holds a finished build of this size."""
    conn = await asyncpg.connect(dsn)
    try:
        if await conn.fetchval("SELECT to_regclass('bench_scale_built')") is None:
            return False
        return bool(await conn.fetchval("SELECT EXISTS (SELECT 1 FROM bench_scale_built "
                                        "WHERE ended = $1 AND pending = $2)", ended, pending))
    finally:
        await conn.close()


def _statements(sql: str) -> list[str]:
    return [s for s in sql.split(";\n") if s.strip()]


# The loaded tables' indexes that back no constraint (a partitioned table's: its
# parent's, built on every month when made again).
_LOOSE_INDEXES = """
SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS ddl
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = ANY ($1::regclass[])
  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
ORDER BY c.relname
"""
_LOADED = ["submissions", "ai_marking_queue", "ai_marking_attempts", "ai_marking_results",
           "ai_marking_events"]


async def _timed(conn: asyncpg.Connection, label: str, statement: str, *args: object) -> None:
    started = time.perf_counter()
    await conn.execute(statement, *args)
    print(f"  {label}: {time.perf_counter() - started:.1f} s", flush=True)


async def build(dsn: str, ended: int, pending: int, groups: int) -> None:
    conn = await asyncpg.connect(dsn, command_timeout=None)
    try:
        await conn.execute("SET statement_timeout = 0; SET maintenance_work_mem = '512MB';"
                           " SET synchronous_commit = off; SET work_mem = '256MB'")
        await conn.execute(_PARTITIONS)
        indexes = await conn.fetch(_LOOSE_INDEXES, _LOADED)
        for ix in indexes:
            await conn.execute(f'DROP INDEX "{ix["name"]}"')
        print(f"  {len(indexes)} indexes dropped for the load", flush=True)
        await conn.execute("SET session_replication_role = replica")
        await _timed(conn, "subjects", _statements(_SUBJECTS)[0], ended, pending, groups)
        await _timed(conn, "submissions", _statements(_SUBJECTS)[1])
        await _timed(conn, "queue rows", _ROWS, groups)
        for statement in _statements(_HISTORY):
            await _timed(conn, "history", statement)
        await _timed(conn, "ready rows", READY_ROWS)
        await conn.execute("SET session_replication_role = origin")
        for ix in indexes:
            # A partitioned table's index is defined ON ONLY its parent: built on every month.
            await _timed(conn, f"index {ix['name']}", ix["ddl"].replace(" ON ONLY ", " ON ", 1))
        for statement in _statements(_GROUPS):
            await _timed(conn, "groups, counts and usage hours", statement)
        await conn.execute(ESTIMATES)
        await conn.execute("INSERT INTO bench_scale_built VALUES ($1, $2, now())", ended, pending)
        await _timed(conn, "vacuum analyze", "VACUUM ANALYZE")
    finally:
        await conn.close()
