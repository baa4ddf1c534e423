-- Back to the schema before 0008 (functions: db/sql/functions.sql, re-applied by
-- the next `migrate up`).
DROP TABLE IF EXISTS ai_marking_tally;
DROP TABLE IF EXISTS ai_marking_results;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM aiqueue_meta WHERE key = 'review_added_group') THEN
        ALTER TABLE ai_marking_queue DROP COLUMN IF EXISTS "group";
        DELETE FROM aiqueue_meta WHERE key = 'review_added_group';
    END IF;
END
$$;
