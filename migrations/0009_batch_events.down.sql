-- Back to one change-feed row per queue row: batch rows are spread out again
-- (same transaction, new ids in batch order) before the columns go.
DROP VIEW IF EXISTS ai_marking_event_feed;
INSERT INTO ai_marking_events (tx, assignment_id, queue_id, submission_id, status, summary,
                               created_at)
SELECT e.tx, e.assignment_id, u.queue_id, u.submission_id, e.status, e.summary, e.created_at
FROM ai_marking_events e,
     unnest(e.queue_ids, e.submission_ids) WITH ORDINALITY AS u (queue_id, submission_id, k)
WHERE e.queue_ids IS NOT NULL
ORDER BY e.tx, e.id, u.k;
DELETE FROM ai_marking_events WHERE queue_ids IS NOT NULL;
ALTER TABLE ai_marking_events
    DROP CONSTRAINT ai_marking_events_row_or_batch,
    DROP COLUMN queue_ids,
    DROP COLUMN submission_ids,
    ALTER COLUMN queue_id SET NOT NULL,
    ALTER COLUMN submission_id SET NOT NULL;
