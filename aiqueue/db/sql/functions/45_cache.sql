-- The provider's prompt cache (docs/prompt-cache.md): warm-up and locality within fair turns.
--
-- A row's prefix is its payload.  A provider keeps a prefix it has seen for
-- about ttl_seconds from its last use, and bills a read of it at a fraction of
-- the input price; an entry is readable only once the call that wrote it has
-- begun its answer.  So the claim (aiqueue_fair_pick, 40_fair):
--   * sends one row of a cold prefix alone and holds the prefix's other rows
--     until that row's answer (or a progress item) arrived, one mark at most;
--     meanwhile the walk serves other groups;
--   * among the waiting groups whose counter is within the pool's quantum of
--     the smallest, serves first a group whose prefix is warm and was used less
--     than ttl minus a margin ago: Deficit Longest Prefix Match (Cao et al.,
--     "Locality-aware Fair Scheduling in LLM Serving", 2025) with time in place
--     of GPU memory.
-- A prefix under min_tokens (its JSON length / 4, or the cached size the
-- function last reported) is never cached: scheduled as before.
--
-- The pool's settings travel in the claim plan (QueueConfig.plan):
--   pools[].cache = {"ttl", "min", "quantum" (NULL: 4 × the pool's mean row
--   charge), "key_rpm"}; no "cache" (or ttl 0): scheduled as before.

-- A pool's cache settings from the plan; NULL when the pool schedules as before.
CREATE OR REPLACE FUNCTION aiqueue_cache_spec(plan jsonb, p_pool text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN (SELECT x.cache FROM jsonb_to_recordset(plan -> 'pools') AS x (name text, cache jsonb)
            WHERE x.name = p_pool AND jsonb_typeof(x.cache -> 'ttl') = 'number'
              AND (x.cache ->> 'ttl')::float8 > 0);
END
$$;

-- The margin a warm prefix keeps before its entry's life runs out: the time a
-- dispatch takes to reach the provider, and a mark's jitter.
CREATE OR REPLACE FUNCTION aiqueue_cache_margin(spec jsonb) RETURNS interval
LANGUAGE sql IMMUTABLE AS $$
    SELECT make_interval(secs => (spec ->> 'ttl')::float8 * 0.1)
$$;

-- How long a slot waits for a warm-up at most: one mark of the pool (its
-- recent mean), 30 s before any is known.
CREATE OR REPLACE FUNCTION aiqueue_cache_mark(p_pool text) RETURNS interval
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN make_interval(secs => coalesce(
        (SELECT c.mark_seconds FROM ai_marking_cache_pools c WHERE c.pool = p_pool), 30));
END
$$;

-- The state at a pool's provider of the prefix `p_payload` (a row's payload;
-- NULL: none), for the claim:
--   off      not cached (no payload, or under min_tokens): scheduled as before
--   cold     none of its rows had an answer within ttl: one row goes alone
--   warming  its lone row is out, no answer yet: `hold` until one mark after
--   warm     a row had an answer within ttl
--   hot      warm, and a row was dispatched less than ttl minus the margin ago
-- `seen`: when a row of it was last dispatched, as far as the prefix row says.
CREATE OR REPLACE FUNCTION aiqueue_cache_state(spec jsonb, p_pool text, p_payload bigint,
                                               OUT state text, OUT hold timestamptz,
                                               OUT seen timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    p ai_marking_prefixes%ROWTYPE;
    size float8;
    ttl interval := make_interval(secs => (spec ->> 'ttl')::float8);
BEGIN
    state := 'off';
    IF spec IS NULL OR p_payload IS NULL THEN
        RETURN;
    END IF;
    SELECT * INTO p FROM ai_marking_prefixes x
    WHERE x.pool = p_pool AND x.payload_id = p_payload;
    size := CASE WHEN FOUND THEN p.tokens ELSE aiqueue_cache_size(p_payload) END;
    seen := p.dispatched_at;
    IF size < coalesce((spec ->> 'min')::float8, 1024) THEN
        RETURN;
    END IF;
    IF p.answered_at > now() - ttl THEN
        state := CASE WHEN p.dispatched_at > now() - ttl + aiqueue_cache_margin(spec)
                      THEN 'hot' ELSE 'warm' END;
    ELSIF p.warming_at IS NOT NULL AND (p.answered_at IS NULL OR p.answered_at < p.warming_at)
          AND p.warming_at + aiqueue_cache_mark(p_pool) > now() THEN
        state := 'warming';
        hold := p.warming_at + aiqueue_cache_mark(p_pool);
    ELSE
        state := 'cold';
    END IF;
END
$$;

-- A payload's estimated tokens: its JSON length / 4.
CREATE OR REPLACE FUNCTION aiqueue_cache_size(p_payload bigint) RETURNS float8
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT length(pl.payload::text) / 4.0 FROM ai_marking_payloads pl
                     WHERE pl.id = p_payload), 0);
END
$$;

-- A row of a cacheable prefix was picked (`state` as aiqueue_cache_state saw
-- it): the prefix is used now (a cold one starts warming with this row), its
-- minute's count grows (key_rpm), and its group is warm until ttl minus the
-- margin from now.  A prefix another transaction is noting right now is left
-- to it (claims run at once, and a claim holding counter rows never waits for
-- another's, 42_fair_pick): the advisory lock of the prefix's note, then its
-- row, are taken without waiting, else nothing is written; two claims noting
-- the same prefix at once note it once.
CREATE OR REPLACE FUNCTION aiqueue_cache_dispatched(spec jsonb, p_pool text, p_priority integer,
                                                    p_group text, p_payload bigint, state text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_payload IS NOT NULL THEN
        IF NOT pg_try_advisory_xact_lock(hashtext('aiqueue.prefix'),
                                         hashtext(p_pool || '/' || p_payload)) THEN
            RETURN;
        END IF;
        PERFORM 1 FROM ai_marking_prefixes x
        WHERE x.pool = p_pool AND x.payload_id = p_payload FOR UPDATE SKIP LOCKED;
        IF NOT FOUND AND EXISTS (SELECT 1 FROM ai_marking_prefixes x
                                 WHERE x.pool = p_pool AND x.payload_id = p_payload) THEN
            RETURN;
        END IF;
    END IF;
    IF state = 'off' THEN
        -- A prefix too short to cache is noted once an hour, for the doctor
        -- ("prefixes of about 600 tokens: the model caches none").
        IF p_payload IS NOT NULL THEN
            INSERT INTO ai_marking_prefixes AS x (pool, payload_id, tokens, dispatched_at)
            VALUES (p_pool, p_payload, aiqueue_cache_size(p_payload), now())
            ON CONFLICT (pool, payload_id) DO UPDATE SET dispatched_at = now()
            WHERE x.dispatched_at IS NULL OR x.dispatched_at < now() - interval '1 hour';
        END IF;
        RETURN;
    END IF;
    INSERT INTO ai_marking_prefixes AS x (pool, payload_id, tokens, dispatched_at, warming_at,
                                          minute_at, minute_count)
    VALUES (p_pool, p_payload, aiqueue_cache_size(p_payload), now(),
            CASE WHEN state = 'cold' THEN now() END, date_trunc('minute', now()), 1)
    ON CONFLICT (pool, payload_id) DO UPDATE
    SET dispatched_at = now(),
        warming_at = CASE WHEN state = 'cold' THEN now() ELSE x.warming_at END,
        minute_count = CASE WHEN x.minute_at = date_trunc('minute', now())
                            THEN x.minute_count + 1 ELSE 1 END,
        minute_at = date_trunc('minute', now());
    UPDATE ai_marking_fair f
    SET warm_until = now() + make_interval(secs => (spec ->> 'ttl')::float8)
                     - aiqueue_cache_margin(spec)
    WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group;
END
$$;

-- The pool's quantum in weighted tokens: fair_quantum, else 4 × its mean row
-- charge (1,250 weighted tokens before any result: aiqueue_estimate's default).
CREATE OR REPLACE FUNCTION aiqueue_cache_quantum(spec jsonb, p_pool text) RETURNS float8
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF jsonb_typeof(spec -> 'quantum') = 'number' THEN
        RETURN (spec ->> 'quantum')::float8;
    END IF;
    RETURN 4 * coalesce((SELECT c.row_tokens FROM ai_marking_cache_pools c
                         WHERE c.pool = p_pool), 1250);
END
$$;
