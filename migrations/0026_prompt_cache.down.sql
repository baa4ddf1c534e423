ALTER TABLE ai_marking_results
    DROP COLUMN IF EXISTS cache_read_tokens,
    DROP COLUMN IF EXISTS cache_write_tokens,
    DROP COLUMN IF EXISTS cache_saved_tokens,
    DROP COLUMN IF EXISTS cache_saved_usd;
DROP INDEX IF EXISTS ai_marking_fair_warm_idx;
ALTER TABLE ai_marking_fair DROP COLUMN IF EXISTS warm_until;
DROP TABLE IF EXISTS ai_marking_cache_pools;
DROP TABLE IF EXISTS ai_marking_prefixes;
