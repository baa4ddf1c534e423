DROP TABLE IF EXISTS ai_marking_estimates;
DROP TABLE IF EXISTS ai_marking_spend;
DROP INDEX IF EXISTS ai_marking_queue_group_idx;
ALTER TABLE ai_marking_queue
    DROP COLUMN IF EXISTS charged_tokens,
    DROP COLUMN IF EXISTS charged_usd,
    DROP COLUMN IF EXISTS charged_at;
DROP TABLE IF EXISTS ai_marking_fair;
