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
