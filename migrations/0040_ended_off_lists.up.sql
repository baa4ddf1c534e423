-- aiqueue 0040: ended rows off the list indexes a claim writes (docs/architecture.md).
--
-- A claim and a completion are each a non-HOT update of the row, so every
-- index whose predicate the new version meets gets one more entry.  Two full
-- list indexes, (created_at, queue_id) and (status, created_at, queue_id),
-- took an entry at enqueue, at the claim and at the end of every job.  One list
-- index now holds rows in every state but `processing` (a row in flight is at
-- most a cap's worth, found through ai_marking_queue_processing_run_idx): an
-- entry at enqueue and one at the end.  The stats' completed index folds into
-- the finished index (one entry at a row's end, not two).
DROP INDEX IF EXISTS ai_marking_queue_created_idx;
DROP INDEX IF EXISTS ai_marking_queue_status_created_idx;
DROP INDEX IF EXISTS ai_marking_queue_completed_idx;
DROP INDEX IF EXISTS ai_marking_queue_finished_idx;
CREATE INDEX ai_marking_queue_list_idx
    ON ai_marking_queue (status, created_at DESC, queue_id DESC)
    WHERE status <> 'processing';
CREATE INDEX ai_marking_queue_finished_idx
    ON ai_marking_queue (status, finished_at) INCLUDE (started_at)
    WHERE finished_at IS NOT NULL;
