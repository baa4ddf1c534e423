-- aiqueue 0026: the provider's prompt cache (docs/prompt-cache.md).
--
-- A row's prefix is its payload (ai_marking_payloads, one per distinct payload).
-- What the claim knows of each prefix at a pool's provider: its size in tokens
-- (the payload's JSON length / 4 until the function reports its cached part),
-- when a row of it last had an answer (warm while within ttl_seconds), when a
-- row of it was last dispatched, and the lone warm-up row of a cold prefix
-- (db/sql/functions/45_cache.sql).  Pruned with its payload.
CREATE TABLE ai_marking_prefixes (
    pool text NOT NULL,
    payload_id bigint NOT NULL,
    tokens float8 NOT NULL,
    answered_at timestamptz,
    dispatched_at timestamptz,
    warming_at timestamptz,
    -- Dispatches in the current minute (key_rpm shards the cache key above it).
    minute_at timestamptz,
    minute_count integer NOT NULL DEFAULT 0,
    PRIMARY KEY (pool, payload_id)
);

-- A pool's cache figures: what its results read and wrote (counters for
-- /metrics, only growing), what the cache saved, and the running means the
-- claim needs (a mark's seconds: the longest a slot waits for a warm-up; a
-- row's weighted charge: the default quantum).
CREATE TABLE ai_marking_cache_pools (
    pool text PRIMARY KEY,
    read_tokens bigint NOT NULL DEFAULT 0,
    write_tokens bigint NOT NULL DEFAULT 0,
    prompt_tokens bigint NOT NULL DEFAULT 0,
    saved_usd float8 NOT NULL DEFAULT 0,
    mark_seconds float8,
    row_tokens float8,
    prefix_tokens float8,
    samples integer NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Until when a waiting group's prefix is warm and recently used: the claim
-- serves such a group first while its counter is within the pool's quantum of
-- the smallest (Deficit Longest Prefix Match).  NULL: not warm.
ALTER TABLE ai_marking_fair ADD COLUMN warm_until timestamptz;
CREATE INDEX ai_marking_fair_warm_idx ON ai_marking_fair (pool, priority, counter)
    WHERE waiting AND warm_until IS NOT NULL;

-- What a result read from and wrote to the cache, and what that saved: input
-- tokens (all input less the billed input; below 0 when writes cost more)
-- and USD.
ALTER TABLE ai_marking_results
    ADD COLUMN cache_read_tokens bigint,
    ADD COLUMN cache_write_tokens bigint,
    ADD COLUMN cache_saved_tokens bigint,
    ADD COLUMN cache_saved_usd float8;
