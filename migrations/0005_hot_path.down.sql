-- Back to 0004's schema (functions and triggers: db/sql/functions.sql, re-applied by
-- the next `migrate up`).
ALTER TABLE ai_marking_queue RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor, autovacuum_analyze_threshold);
DROP INDEX ai_marking_queue_finished_idx;
CREATE INDEX ai_marking_queue_finished_idx ON ai_marking_queue (status, finished_at);
ALTER TABLE ai_queue_control DROP COLUMN IF EXISTS listened_until;
