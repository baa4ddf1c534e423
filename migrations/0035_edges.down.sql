ALTER TABLE ai_marking_batches DROP COLUMN IF EXISTS base_url, DROP COLUMN IF EXISTS key_env;

-- Back to the note in last_error ("operator: <note>"), then without the column.
UPDATE ai_marking_queue q SET last_error = 'operator: ' || a.note
FROM ai_marking_attempts a
WHERE a.queue_id = q.queue_id AND a.kind = 'action' AND a.outcome = 'fail'
  AND a.note IS NOT NULL AND q.status = 'failed' AND q.last_error = 'operator';
ALTER TABLE ai_marking_attempts DROP COLUMN IF EXISTS note;
