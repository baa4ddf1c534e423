-- aiqueue 0009: an enqueue writes one change-feed row per assignment and status,
-- not one per queue row.
--
-- At 10,000 ids the per-row feed was 36 ms of the statement's 220 (10,000 heap
-- rows, three index entries each).  A batch row lists its rows in two aligned
-- arrays; the view ai_marking_event_feed gives every reader one event per queue
-- row again, with k (1-based) its place in the batch, 0 for a single-row event.
-- Live events keep their contract: one `marking` event per row status change.
ALTER TABLE ai_marking_events
    ALTER COLUMN queue_id DROP NOT NULL,
    ALTER COLUMN submission_id DROP NOT NULL,
    ADD COLUMN queue_ids uuid[],
    ADD COLUMN submission_ids uuid[],
    ADD CONSTRAINT ai_marking_events_row_or_batch CHECK (
        CASE WHEN queue_ids IS NULL
             THEN queue_id IS NOT NULL AND submission_id IS NOT NULL AND submission_ids IS NULL
             ELSE queue_id IS NULL AND submission_id IS NULL
                  AND cardinality(queue_ids) = cardinality(submission_ids) END);

CREATE VIEW ai_marking_event_feed AS
SELECT e.id, e.tx, b.k, e.assignment_id, b.queue_id, b.submission_id, e.status, e.summary,
       e.created_at
FROM ai_marking_events e
CROSS JOIN LATERAL (
    SELECT e.queue_id, e.submission_id, 0::bigint AS k WHERE e.queue_ids IS NULL
    UNION ALL
    SELECT u.queue_id, u.submission_id, u.k
    FROM unnest(e.queue_ids, e.submission_ids) WITH ORDINALITY AS u (queue_id, submission_id, k)
) b;
