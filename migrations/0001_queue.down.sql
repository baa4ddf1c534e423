DROP TABLE IF EXISTS ai_marking_events;
DROP TABLE IF EXISTS ai_marking_attempts;
DROP TABLE IF EXISTS ai_marking_queue;
DROP FUNCTION IF EXISTS aiqueue_record_inserts();
DROP FUNCTION IF EXISTS aiqueue_record_move();
DROP FUNCTION IF EXISTS aiqueue_claim(integer, integer);
DROP FUNCTION IF EXISTS aiqueue_complete(uuid, jsonb, jsonb, integer);
DROP FUNCTION IF EXISTS aiqueue_gate_open(integer, integer);
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
