-- The usage report (aiqueue/reads/usage.py) and the /metrics counters
-- (aiqueue/reads/metrics.py).

-- usage_report --
-- Applied results and canary rows in [$1, $2) per key ($3: day, assignment, group,
-- model, kind, pool or lane; a day is a date in the time zone $4, QUEUE_TIMEZONE),
-- then the total (ROLLUP's empty grouping set, also when nothing matched).
-- The BRIN index on applied_at bounds the scan to the range's blocks.
WITH r AS (
    SELECT CASE $3::text
               WHEN 'day' THEN to_char(applied_at AT TIME ZONE $4::text, 'YYYY-MM-DD')
               WHEN 'assignment' THEN assignment_id
               WHEN 'group' THEN coalesce("group", assignment_id)
               WHEN 'kind' THEN kind
               WHEN 'pool' THEN pool
               WHEN 'lane' THEN lane
               ELSE coalesce(model, 'unknown')
           END AS key,
           prompt_tokens, completion_tokens, cost_usd, processing_seconds, cache_read_tokens,
           cache_write_tokens, cache_saved_tokens, cache_saved_usd
    FROM ai_marking_results
    WHERE applied_at >= $1::timestamptz AND applied_at < $2::timestamptz
    UNION ALL
    -- Drift canaries' rows (docs/canaries.md): their own lane, "canary".
    SELECT CASE $3::text
               WHEN 'day' THEN to_char(c.answered_at AT TIME ZONE $4::text, 'YYYY-MM-DD')
               WHEN 'assignment' THEN c.assignment_id
               WHEN 'group' THEN c.assignment_id
               WHEN 'kind' THEN r.kind
               WHEN 'pool' THEN r.pool
               WHEN 'lane' THEN 'canary'
               ELSE coalesce(c.model, 'unknown')
           END,
           aiqueue_usage_int(c.usage -> 'prompt_tokens'),
           aiqueue_usage_int(c.usage -> 'completion_tokens'), c.cost_usd::numeric,
           date_part('epoch', c.answered_at - c.sent_at), NULL, NULL, NULL, NULL
    FROM ai_marking_canary_rows c JOIN ai_marking_canary_runs r ON r.run_id = c.run_id
    WHERE c.answered_at >= $1::timestamptz AND c.answered_at < $2::timestamptz
      AND c.state = 'answered'
)
SELECT key, grouping(key) = 1 AS is_total, count(*) AS jobs,
       coalesce(sum(prompt_tokens), 0)::bigint AS prompt_tokens,
       coalesce(sum(completion_tokens), 0)::bigint AS completion_tokens,
       sum(cost_usd)::float8 AS cost_usd,
       count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced_jobs,
       avg(processing_seconds)::float8 AS avg_seconds,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY processing_seconds)::float8 AS p95_seconds,
       -- The provider's prompt cache (docs/prompt-cache.md).
       coalesce(sum(cache_read_tokens), 0)::bigint AS cache_read_tokens,
       coalesce(sum(cache_write_tokens), 0)::bigint AS cache_write_tokens,
       coalesce(sum(cache_saved_tokens), 0)::bigint AS cache_saved_tokens,
       sum(cache_saved_usd)::float8 AS cache_saved_usd
FROM r
GROUP BY ROLLUP (key)
ORDER BY is_total, key;

-- usage_card --
-- /ai-queue's cost card: the usage of [$1, $3) (the last 30 days) in total
-- ('month'), by model and by lane, and of [$2, $3) (today) in total; the same
-- sums as usage_report's.  Each hour that ai_marking_usage_hours holds
-- (96_usage_hours.sql), that lies wholly within [$1, $3) and on one side of $2,
-- and that is within the results' keep period ($4 seconds: retention may have
-- deleted from an older one) is read from there; the rest (today's hours, the
-- edges of a day that starts on the half hour, an hour an erasure reopened) is
-- read from the results, one range per run of such hours.
WITH hours AS MATERIALIZED (
    SELECT h.h, h.h >= $1::timestamptz AND h.h + interval '1 hour' <= $3::timestamptz
               AND (h.h >= $2::timestamptz OR h.h + interval '1 hour' <= $2::timestamptz)
               AND h.h >= now() - make_interval(secs => $4::float8)
               AND EXISTS (SELECT 1 FROM ai_marking_usage_hours u
                           WHERE u.hour = h.h AND u.lane IS NULL) AS summed
    FROM generate_series(date_bin('1 hour', $1::timestamptz, TIMESTAMPTZ 'epoch'),
                         $3::timestamptz - interval '1 microsecond', interval '1 hour') AS h (h)
),
rest AS (
    SELECT greatest(min(x.h), $1::timestamptz) AS lo,
           least(max(x.h) + interval '1 hour', $3::timestamptz) AS hi
    FROM (SELECT h, h - row_number() OVER (ORDER BY h) * interval '1 hour' AS run
          FROM hours WHERE NOT summed) x
    GROUP BY x.run
),
pieces AS MATERIALIZED (
    SELECT u.hour >= $2::timestamptz AS today, u.model, u.lane, u.jobs, u.unpriced_jobs,
           u.prompt_tokens, u.completion_tokens, u.cost_usd, u.cache_read_tokens,
           u.cache_write_tokens, u.cache_saved_tokens, u.cache_saved_usd
    FROM hours h JOIN ai_marking_usage_hours u ON u.hour = h.h
    WHERE h.summed AND u.lane IS NOT NULL
    UNION ALL
    SELECT m.applied_at >= $2::timestamptz, coalesce(m.model, 'unknown'), m.lane, 1,
           (m.cost_usd IS NULL)::integer, coalesce(m.prompt_tokens, 0),
           coalesce(m.completion_tokens, 0), m.cost_usd, coalesce(m.cache_read_tokens, 0),
           coalesce(m.cache_write_tokens, 0), coalesce(m.cache_saved_tokens, 0),
           m.cache_saved_usd
    FROM rest r
    -- Per range (OFFSET 0 keeps it a scan per range, not a join): only the months
    -- it reaches, through the BRIN index on applied_at.
    CROSS JOIN LATERAL (SELECT * FROM ai_marking_results x
                        WHERE x.applied_at >= r.lo AND x.applied_at < r.hi OFFSET 0) m
    UNION ALL
    -- Drift canaries' rows (docs/canaries.md), their own lane, as usage_report counts them.
    SELECT c.answered_at >= $2::timestamptz, coalesce(c.model, 'unknown'), 'canary', 1,
           (c.cost_usd IS NULL)::integer,
           coalesce(aiqueue_usage_int(c.usage -> 'prompt_tokens'), 0),
           coalesce(aiqueue_usage_int(c.usage -> 'completion_tokens'), 0), c.cost_usd::numeric,
           0, 0, 0, NULL
    FROM ai_marking_canary_rows c JOIN ai_marking_canary_runs r ON r.run_id = c.run_id
    WHERE c.answered_at >= $1::timestamptz AND c.answered_at < $3::timestamptz
      AND c.state = 'answered'
)
SELECT CASE WHEN grouping(model) = 0 THEN 'model' WHEN grouping(lane) = 0 THEN 'lane'
            ELSE 'month' END AS part,
       coalesce(model, lane) AS key, coalesce(sum(jobs), 0)::bigint AS jobs,
       coalesce(sum(unpriced_jobs), 0)::bigint AS unpriced_jobs,
       coalesce(sum(prompt_tokens), 0)::bigint AS prompt_tokens,
       coalesce(sum(completion_tokens), 0)::bigint AS completion_tokens,
       sum(cost_usd)::float8 AS cost_usd,
       coalesce(sum(cache_read_tokens), 0)::bigint AS cache_read_tokens,
       coalesce(sum(cache_write_tokens), 0)::bigint AS cache_write_tokens,
       coalesce(sum(cache_saved_tokens), 0)::bigint AS cache_saved_tokens,
       sum(cache_saved_usd)::float8 AS cache_saved_usd
FROM pieces
GROUP BY GROUPING SETS ((model), (lane), ())
UNION ALL
SELECT 'today', NULL, coalesce(sum(jobs) FILTER (WHERE today), 0)::bigint,
       coalesce(sum(unpriced_jobs) FILTER (WHERE today), 0)::bigint,
       coalesce(sum(prompt_tokens) FILTER (WHERE today), 0)::bigint,
       coalesce(sum(completion_tokens) FILTER (WHERE today), 0)::bigint,
       (sum(cost_usd) FILTER (WHERE today))::float8,
       coalesce(sum(cache_read_tokens) FILTER (WHERE today), 0)::bigint,
       coalesce(sum(cache_write_tokens) FILTER (WHERE today), 0)::bigint,
       coalesce(sum(cache_saved_tokens) FILTER (WHERE today), 0)::bigint,
       (sum(cache_saved_usd) FILTER (WHERE today))::float8
FROM pieces
ORDER BY part, key;

-- metrics_counters --
-- The counters' deltas summed (ai_marking_tally, folded by the prune).
SELECT outcome, job, error, model, le, sum(n)::bigint AS n,
       sum(prompt_tokens)::bigint AS prompt_tokens,
       sum(completion_tokens)::bigint AS completion_tokens,
       sum(cost_usd)::float8 AS cost_usd, sum(seconds)::float8 AS seconds
FROM ai_marking_tally
GROUP BY outcome, job, error, model, le;

-- cache_counters --
-- Each pool's prompt cache counters (only growing): tokens read and written,
-- and what the cache saved in USD (aiqueue_cache_result, 46_cache_billed.sql).
SELECT pool, read_tokens, write_tokens, saved_usd FROM ai_marking_cache_pools ORDER BY pool;

-- metrics_buckets --
SELECT unnest(aiqueue_buckets()) AS le;
