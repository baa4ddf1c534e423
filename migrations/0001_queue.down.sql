-- Functions and triggers are dropped by `migrate` before this runs (db/migrate.py).
DROP TABLE IF EXISTS ai_marking_events;
DROP TABLE IF EXISTS ai_marking_attempts;
DROP TABLE IF EXISTS ai_marking_queue;
DROP TABLE IF EXISTS ai_queue_control;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM aiqueue_meta WHERE key = 'created_submissions') THEN
        DROP TABLE IF EXISTS submissions;
    ELSIF EXISTS (SELECT 1 FROM aiqueue_meta WHERE key = 'added_ai_columns') THEN
        ALTER TABLE submissions DROP COLUMN IF EXISTS ai_result, DROP COLUMN IF EXISTS ai_marked_at;
    END IF;
END
$$;

DROP TABLE IF EXISTS aiqueue_meta;
