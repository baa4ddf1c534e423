ALTER TABLE ai_marking_attempts
    DROP COLUMN IF EXISTS next_queue_id,
    DROP COLUMN IF EXISTS next_seq,
    DROP COLUMN IF EXISTS sent_at;
