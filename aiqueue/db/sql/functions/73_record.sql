-- What a settle leaves behind: a completed row's record (ai_marking_results) and
-- its counter delta (ai_marking_tally), and the helpers that read a usage.

-- A completed row's review record of what the result replaced
-- (ai_marking_results), with what the prompt cache read, wrote and saved when
-- it counted (NULLs when not: 45_cache.sql), and its one counter delta
-- (ai_marking_tally), in one statement.  `r`: the completed row, its usage
-- priced (aiqueue_priced: with its billed input); `outcome`: its attempt's;
-- `applies`: whether the result was applied (aiqueue_result_applies).
CREATE OR REPLACE FUNCTION aiqueue_complete_record(r ai_marking_queue, p_result jsonb,
                                                   previous jsonb, previous_at timestamptz,
                                                   outcome text, applies boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    model text := r.usage ->> 'model';
    prompt bigint := aiqueue_usage_int(r.usage -> 'prompt_tokens');
    completion bigint := aiqueue_usage_int(r.usage -> 'completion_tokens');
    cost numeric := CASE WHEN jsonb_typeof(r.usage -> 'cost_usd') = 'number'
                         THEN (r.usage ->> 'cost_usd')::numeric END;
    seconds float8 := date_part('epoch', now() - r.started_at);
    reads bigint := coalesce(aiqueue_usage_int(r.usage -> 'cache_read_tokens'), 0);
    writes bigint := coalesce(aiqueue_usage_int(r.usage -> 'cache_write_tokens'), 0);
    saved float8;
    saved_tokens bigint;
BEGIN
    IF reads + writes > 0 THEN
        saved := coalesce((r.usage ->> 'cache_saved_usd')::float8, 0);
        saved_tokens := coalesce(prompt, 0) - coalesce(aiqueue_usage_int(coalesce(
            r.usage -> 'billed_prompt_tokens', r.usage -> 'prompt_tokens')), 0);
    ELSE
        reads := NULL;
        writes := NULL;
    END IF;
    -- One record per row, as a key on queue_id kept it before the results became
    -- month partitions (97_partitions.sql; the parent has no key to conflict on):
    -- a record already there (backfilled by migration 0008 for a row completed
    -- before) is kept, with the cache's counts.  The row's lock orders two
    -- settles of it; a record is no older than its row, so only the months since
    -- the row was created are looked at.
    WITH known AS (
        UPDATE ai_marking_results m
        SET (cache_read_tokens, cache_write_tokens, cache_saved_usd, cache_saved_tokens)
            = (reads, writes, saved, saved_tokens)
        WHERE m.queue_id = r.queue_id AND m.applied_at >= aiqueue_months_from(r.created_at) AND reads IS NOT NULL
    ),
    record AS (
        INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, run_id,
                                        "group", result, previous_result, previous_marked_at,
                                        model, prompt_tokens, completion_tokens, cost_usd,
                                        processing_seconds, kind, pool, lane, cache_read_tokens,
                                        cache_write_tokens, cache_saved_usd, cache_saved_tokens,
                                        payload_version, function_version, provider, applied)
        SELECT r.queue_id, r.submission_id, r.assignment_id, r.run_id, r.group_key, p_result,
               previous, previous_at, model, prompt, completion, cost, seconds, r.kind, r.pool,
               -- the overnight lane (0020) marks its usage; everything else is live
               CASE WHEN r.usage ->> 'lane' = 'batch' THEN 'batch' ELSE 'live' END,
               reads, writes, saved, saved_tokens,
               -- the audit record (77_remark)
               aiqueue_payload_version(r.payload_id), left(r.usage ->> 'function_version', 200),
               left(r.usage ->> 'provider', 200), applies
        WHERE NOT EXISTS (SELECT 1 FROM ai_marking_results m
                          WHERE m.queue_id = r.queue_id AND m.applied_at >= aiqueue_months_from(r.created_at))
    )
    INSERT INTO ai_marking_tally (outcome, job, model, le, prompt_tokens, completion_tokens,
                                  cost_usd, seconds)
    VALUES (coalesce(outcome, 'completed'), 'completed', model,
            (SELECT min(b) FROM unnest(aiqueue_buckets()) b WHERE b >= seconds),
            coalesce(prompt, 0), coalesce(completion, 0), coalesce(cost, 0),
            coalesce(seconds, 0));
    RETURN true;
END
$$;

-- A token count from a usage object: a non-negative whole number, else NULL.
CREATE OR REPLACE FUNCTION aiqueue_usage_int(v jsonb) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(v) = 'number' AND (v::text)::numeric >= 0
                     AND (v::text)::numeric < 1e15
                THEN round((v::text)::numeric)::bigint END
$$;

-- The processing-time buckets of the /metrics histogram (upper bounds, seconds).
CREATE OR REPLACE FUNCTION aiqueue_buckets() RETURNS float8[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY[0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600]::float8[]
$$;
