-- An operator's note on an action (a row failed by hand) stays in the row's history, read
-- on /ai-queue only: the row's last_error is the code `operator`, as the list, the API and
-- the notification show it (docs/operating/monitor.md).
ALTER TABLE ai_marking_attempts ADD COLUMN IF NOT EXISTS note text;

-- Rows failed by hand before: their note moves from last_error to the history.
UPDATE ai_marking_attempts a SET note = substr(q.last_error, length('operator: ') + 1)
FROM ai_marking_queue q
WHERE a.queue_id = q.queue_id AND a.kind = 'action' AND a.outcome = 'fail'
  AND q.status = 'failed' AND q.last_error LIKE 'operator: %';
UPDATE ai_marking_queue SET last_error = 'operator'
WHERE status = 'failed' AND last_error LIKE 'operator: %';

-- Where each batch lives and which variable holds its key, kept with the batch: a pool
-- that stops declaring its batch API (or is removed) still has its open batches polled,
-- applied or cancelled, and deleted at the provider (docs/overnight.md).
ALTER TABLE ai_marking_batches ADD COLUMN IF NOT EXISTS base_url text,
                               ADD COLUMN IF NOT EXISTS key_env text;
