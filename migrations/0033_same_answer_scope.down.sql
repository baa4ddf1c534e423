DROP INDEX IF EXISTS ai_marking_queue_answer_idx;
CREATE INDEX ai_marking_queue_answer_idx
    ON ai_marking_queue ((coalesce(payload_id, 0)), answer_key)
    WHERE answer_key IS NOT NULL AND leader_id IS NULL
      AND status IN ('pending', 'processing');
