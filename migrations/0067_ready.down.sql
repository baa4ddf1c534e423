-- Back to the schema before 0067: the pending walks' partial indexes on the
-- record, its indexes keyed on status, and no ready table.
DROP INDEX IF EXISTS ai_marking_queue_list_idx;
DROP INDEX IF EXISTS ai_marking_queue_finished_idx;
DROP INDEX IF EXISTS ai_marking_queue_live_run_idx;
DROP INDEX IF EXISTS ai_marking_queue_active_uniq;
DROP INDEX IF EXISTS ai_marking_queue_answer_idx;
ALTER TABLE ai_marking_queue DROP COLUMN phase;
ALTER TABLE ai_marking_queue RESET (fillfactor);
-- The ready table's triggers (db/sql/functions/35_ready.sql) name columns an
-- older migration's rollback drops; the next `up` makes them again.
DROP TRIGGER IF EXISTS ai_marking_queue_0_ready_ins ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_0_ready_upd ON ai_marking_queue;
DROP FUNCTION IF EXISTS aiqueue_ready_inserted();
DROP FUNCTION IF EXISTS aiqueue_ready_moved();
DROP TABLE ai_marking_ready;

CREATE INDEX ai_marking_queue_live_run_idx ON ai_marking_queue (run_id)
    WHERE status = ANY (ARRAY['pending', 'processing']);
CREATE INDEX ai_marking_queue_not_before_idx ON ai_marking_queue (not_before)
    WHERE status = 'pending' AND not_before IS NOT NULL;
CREATE INDEX ai_marking_queue_expires_idx ON ai_marking_queue (expires_at)
    WHERE status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX ai_marking_queue_claim_idx ON ai_marking_queue (priority DESC, turn, seq)
    INCLUDE (run_after, kind, pool) WHERE status = 'pending';
CREATE INDEX ai_marking_queue_batch_wait_idx ON ai_marking_queue (priority DESC, seq)
    WHERE status = 'pending' AND lane = 'batch';
CREATE INDEX ai_marking_queue_group_idx
    ON ai_marking_queue (pool, priority, coalesce(group_key, assignment_id), turn, seq)
    INCLUDE (run_after) WHERE status = 'pending';
CREATE INDEX ai_marking_queue_processing_run_idx ON ai_marking_queue (run_id)
    WHERE status = 'processing';
CREATE INDEX ai_marking_queue_group_kind_idx
    ON ai_marking_queue (pool, priority, coalesce(group_key, assignment_id), kind, turn, seq)
    INCLUDE (run_after, expires_at) WHERE status = 'pending';
CREATE INDEX ai_marking_queue_leader_idx ON ai_marking_queue (leader_id, seq)
    WHERE leader_id IS NOT NULL AND status = 'pending';
CREATE INDEX ai_marking_queue_fallback_idx ON ai_marking_queue (kind, pool)
    WHERE run_kind IS NOT NULL AND status = 'pending';
CREATE INDEX ai_marking_queue_answer_idx
    ON ai_marking_queue (answer_key, coalesce(group_key, assignment_id))
    WHERE answer_key IS NOT NULL AND leader_id IS NULL
      AND status = ANY (ARRAY['pending', 'processing']);
CREATE UNIQUE INDEX ai_marking_queue_active_uniq
    ON ai_marking_queue (submission_id, coalesce(payload_id, 0))
    WHERE status = ANY (ARRAY['pending', 'processing']);
CREATE INDEX ai_marking_queue_list_idx ON ai_marking_queue (status, created_at DESC, queue_id DESC)
    WHERE status <> 'processing';
CREATE INDEX ai_marking_queue_finished_idx ON ai_marking_queue (status, finished_at)
    INCLUDE (started_at) WHERE finished_at IS NOT NULL;
