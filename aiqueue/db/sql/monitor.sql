-- The operator page's own statements (/ai-queue), as named blocks.
-- Loaded with every sql/*.sql file; names must not repeat any there.

-- serial_plans --
-- For the statement after it, in the same transaction (`stats`): a dozen
-- small index scans, and starting parallel workers for them costs more than they
-- save (measured at 1,000,000 rows, bench/monitor.py).  SET LOCAL ends with the
-- transaction, so nothing leaks through a transaction pooler.
SET LOCAL max_parallel_workers_per_gather = 0;

-- monitor_throughput --
-- Rows that ended completed or failed per bucket of $2 seconds over the last $1
-- seconds: UTC-aligned buckets, oldest first, empty ones included so the chart
-- needs no gap filling.  Counting ended rows (not attempts) keeps the chart's sums
-- equal to the "today" figures.  Each bucket is two index-only range counts on
-- the (phase, finished_at) index: cost follows the day's throughput, never the
-- table's size, and beats date_bin + hash aggregation over the whole day 2:1.
SELECT s.bucket,
       (SELECT count(*) FROM ai_marking_queue q
        WHERE q.phase = 'completed' AND q.finished_at >= s.bucket
          AND q.finished_at < s.bucket + b.step) AS completed,
       (SELECT count(*) FROM ai_marking_queue q
        WHERE q.phase = 'failed' AND q.finished_at >= s.bucket
          AND q.finished_at < s.bucket + b.step) AS failed
FROM (SELECT date_bin(make_interval(secs => $2::float8), now(), TIMESTAMPTZ 'epoch') AS last,
             make_interval(secs => $2::float8) AS step) b
CROSS JOIN LATERAL generate_series(
    b.last - (ceil($1::float8 / $2::float8)::integer - 1) * b.step, b.last, b.step) AS s (bucket)
ORDER BY s.bucket;

-- monitor_rows_newer --
-- The page just before a keyset cursor (the newer rows), nearest the cursor
-- first; the caller reverses it.  Mirrors list_rows, walking its indexes upward
-- (aiqueue_page_newer).
SELECT queue_id, submission_id, assignment_id, status, attempts, last_error,
       created_at, updated_at, started_at, finished_at, priority,
       coalesce(group_key, assignment_id) AS group_key, kind, pool, not_before, expires_at,
       lane, deadline,
       -- A pending row of a group at a spend cap waits until then (aiqueue 0022).
       aiqueue_spend_resumes_at(status, pool, priority, coalesce(group_key, assignment_id))
           AS resumes_at,
       leader_id AS same_answer_as  -- the row whose mark it copies (aiqueue 0028)
FROM ai_marking_queue
WHERE queue_id IN (SELECT p.queue_id
                   FROM aiqueue_page_newer($1::text, $2::text, $6::text, $7::text,
                                           $3::timestamptz, $4::uuid, $5::bigint) p)
ORDER BY created_at, queue_id
LIMIT $5;

-- monitor_assignments --
-- Distinct assignment ids for the filter's suggestions without reading every row:
-- loose index scans hopping along (assignment_id, created_at), one probe per
-- value, in the live part and in the ended months of this month and the last
-- (UTC; the other months are pruned).  Probing the record's parent instead
-- probed every month for every value: 96 ms for 500 ids over 13 months of
-- 10,000,000 rows, against about 20 ms so (docs/performance.md#a-year-of-a-district).
WITH RECURSIVE live AS (
    (SELECT assignment_id FROM ai_marking_queue_live ORDER BY assignment_id LIMIT 1)
    UNION ALL
    SELECT (SELECT q.assignment_id FROM ai_marking_queue_live q
            WHERE q.assignment_id > a.assignment_id
            ORDER BY q.assignment_id LIMIT 1)
    FROM live a WHERE a.assignment_id IS NOT NULL
), since AS (
    SELECT date_trunc('month', now() AT TIME ZONE 'UTC' - interval '1 month')
           AT TIME ZONE 'UTC' AS at
), ended AS (
    (SELECT assignment_id FROM ai_marking_queue_ended
     WHERE created_at >= (SELECT at FROM since) ORDER BY assignment_id LIMIT 1)
    UNION ALL
    SELECT (SELECT q.assignment_id FROM ai_marking_queue_ended q
            WHERE q.created_at >= (SELECT at FROM since) AND q.assignment_id > a.assignment_id
            ORDER BY q.assignment_id LIMIT 1)
    FROM ended a WHERE a.assignment_id IS NOT NULL
)
SELECT assignment_id FROM (
    (SELECT assignment_id FROM live WHERE assignment_id IS NOT NULL LIMIT $1)
    UNION
    (SELECT assignment_id FROM ended WHERE assignment_id IS NOT NULL LIMIT $1)) x
ORDER BY 1 LIMIT $1;
