-- Back to the schema before 0036.  A submission with two live rows (a re-mark's
-- beside an older payload's) keeps the newer: the older pending one is cancelled
-- first, so the one-live-row index can be built again.
UPDATE ai_marking_queue q SET status = 'cancelled', last_error = 'superseded',
    finished_at = now(), updated_at = now()
WHERE q.status = 'pending'
  AND EXISTS (SELECT 1 FROM ai_marking_queue n
              WHERE n.submission_id = q.submission_id AND n.queue_id <> q.queue_id
                AND n.status IN ('pending', 'processing')
                AND (n.status = 'processing' OR n.seq > q.seq));
DROP INDEX ai_marking_queue_active_uniq;
CREATE UNIQUE INDEX ai_marking_queue_active_uniq
    ON ai_marking_queue (submission_id) WHERE status IN ('pending', 'processing');
DROP TABLE ai_marking_remarks;
ALTER TABLE ai_marking_results
    DROP COLUMN payload_version,
    DROP COLUMN function_version,
    DROP COLUMN provider,
    DROP COLUMN applied;
