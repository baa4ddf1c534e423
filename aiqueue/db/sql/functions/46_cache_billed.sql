-- The prompt cache in a result: the billed input, the prefix made warm, the cache key.

-- A usage with its input as billed (`billed_prompt_tokens`: uncached input
-- × 1 + writes × write + reads × read, the pool's factors in `money`, else
-- 1.0 and 0.10) and what that saved (`cache_saved_usd`, at the pool's input
-- price; a batch-lane result's at its batch price, docs/prompt-cache.md), when
-- it counts cache reads or writes; else the usage as it is.
CREATE OR REPLACE FUNCTION aiqueue_cache_billed(p_usage jsonb, money jsonb, p_pool text)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    reads float8 := coalesce(aiqueue_usage_int(p_usage -> 'cache_read_tokens'), 0);
    writes float8 := coalesce(aiqueue_usage_int(p_usage -> 'cache_write_tokens'), 0);
    prompt float8;
    f jsonb;
    billed float8;
    saved float8;
BEGIN
    -- Most results count no cache: they return before the rest is evaluated.
    IF p_usage IS NULL OR reads + writes = 0 OR p_usage ? 'billed_prompt_tokens' THEN
        RETURN p_usage;
    END IF;
    prompt := coalesce(aiqueue_usage_int(p_usage -> 'prompt_tokens'), 0);
    f := money -> p_pool -> 'cache';
    billed := round(greatest(prompt - reads - writes, 0)
                    + writes * coalesce((f ->> 'write')::float8, 1.0)
                    + reads * coalesce((f ->> 'read')::float8, 0.10));
    saved := CASE WHEN p_usage ->> 'lane' = 'batch'
                  THEN aiqueue_batch_price_usd(money, p_pool, p_usage ->> 'model',
                                               prompt - billed, 0, NULL)
                  ELSE aiqueue_price_usd(money, p_pool, p_usage ->> 'model', prompt - billed, 0)
             END;
    RETURN p_usage || jsonb_strip_nulls(jsonb_build_object(
        'billed_prompt_tokens', billed, 'cache_saved_usd', round(saved::numeric, 9)));
END
$$;

-- A result arrived (aiqueue_money_result; `d`: the completed row, its usage at
-- billed tokens as aiqueue_complete stored it): its prefix is warm; the pool's
-- counters add what it read from and wrote to the cache and what that saved;
-- the prefix's size is the cached part the function reported; a mark's and a
-- row's running means move.  (The result's record took the same counts when
-- it was written: aiqueue_complete_record.)
CREATE OR REPLACE FUNCTION aiqueue_cache_result(d ai_marking_queue) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    reads bigint := coalesce(aiqueue_usage_int(d.usage -> 'cache_read_tokens'), 0);
    writes bigint := coalesce(aiqueue_usage_int(d.usage -> 'cache_write_tokens'), 0);
    prompt float8 := aiqueue_usage_int(coalesce(d.usage -> 'billed_prompt_tokens',
                                                d.usage -> 'prompt_tokens'));
    completion float8 := aiqueue_usage_int(d.usage -> 'completion_tokens');
    saved float8 := coalesce((d.usage ->> 'cache_saved_usd')::float8, 0);
    -- A batch lane's result took a batch's time, not a mark's: no mean moves.
    seconds float8 := CASE WHEN d.usage ->> 'lane' IS DISTINCT FROM 'batch'
                           THEN date_part('epoch', now() - d.started_at) END;
BEGIN
    PERFORM aiqueue_cache_answered(d.pool, d.priority, coalesce(d.group_key, d.assignment_id),
                                   d.payload_id);
    IF greatest(reads, writes) > 0 AND d.payload_id IS NOT NULL THEN
        UPDATE ai_marking_prefixes x SET tokens = greatest(reads, writes)
        WHERE x.pool = d.pool AND x.payload_id = d.payload_id;
    END IF;
    INSERT INTO ai_marking_cache_pools AS c (pool, read_tokens, write_tokens, prompt_tokens,
                                             saved_usd, mark_seconds, row_tokens, samples)
    VALUES (d.pool, reads, writes,
            coalesce(aiqueue_usage_int(d.usage -> 'prompt_tokens'), 0), saved, seconds,
            CASE WHEN seconds IS NOT NULL AND (prompt IS NOT NULL OR completion IS NOT NULL)
                 THEN aiqueue_fair_weight(coalesce(prompt, 0), coalesce(completion, 0)) END,
            CASE WHEN seconds IS NOT NULL THEN 1 ELSE 0 END)
    ON CONFLICT (pool) DO UPDATE
    SET read_tokens = c.read_tokens + EXCLUDED.read_tokens,
        write_tokens = c.write_tokens + EXCLUDED.write_tokens,
        prompt_tokens = c.prompt_tokens + EXCLUDED.prompt_tokens,
        saved_usd = c.saved_usd + EXCLUDED.saved_usd,
        mark_seconds = coalesce(c.mark_seconds + (EXCLUDED.mark_seconds - c.mark_seconds)
                                / least(c.samples + 1, 20), EXCLUDED.mark_seconds,
                                c.mark_seconds),
        row_tokens = coalesce(c.row_tokens + (EXCLUDED.row_tokens - c.row_tokens)
                              / least(c.samples + 1, 20), EXCLUDED.row_tokens, c.row_tokens),
        samples = c.samples + EXCLUDED.samples, updated_at = now();
END
$$;

-- The cache key of a dispatch: the payload's hash, and ":<n>" once its
-- prefix's dispatches this minute pass key_rpm (the provider then spreads the
-- key's requests over n + 1 machines, each of which caches it).
CREATE OR REPLACE FUNCTION aiqueue_cache_key(p_queue_id uuid, key_rpm integer) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r record;
BEGIN
    SELECT encode(coalesce(pl.sha256, sha256(convert_to('{}', 'UTF8'))), 'hex') AS hash,
           x.minute_count, x.minute_at
    INTO r
    FROM ai_marking_queue_live q  -- a dispatch's row (aiqueue 0078)
    LEFT JOIN ai_marking_payloads pl ON pl.id = q.payload_id
    LEFT JOIN ai_marking_prefixes x ON x.pool = q.pool AND x.payload_id = q.payload_id
    WHERE q.queue_id = p_queue_id;
    IF coalesce(key_rpm, 0) <= 0 OR r.minute_at IS DISTINCT FROM date_trunc('minute', now())
       OR r.minute_count <= key_rpm THEN
        RETURN r.hash;
    END IF;
    RETURN r.hash || ':' || ((r.minute_count - 1) / key_rpm)::text;
END
$$;
