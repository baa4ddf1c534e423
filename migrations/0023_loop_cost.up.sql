-- aiqueue 0023: the loop's own cost.
--
-- A row's end pins another processing row of its run instead of taking the
-- claim's advisory lock (functions.sql: aiqueue_outbox_run_finished): this
-- index finds one without walking the run's pending rows.
CREATE INDEX ai_marking_queue_processing_run_idx ON ai_marking_queue (run_id)
    WHERE status = 'processing';

-- The claim's probe of a group: its first due row of each kind with room, so
-- the rows of a kind at its cap are never walked (functions.sql:
-- aiqueue_group_head, aiqueue_due_exists).
CREATE INDEX ai_marking_queue_group_kind_idx
    ON ai_marking_queue (pool, priority, (coalesce(group_key, assignment_id)), kind, turn, seq)
    INCLUDE (run_after, expires_at)
    WHERE status = 'pending';

-- When a waiting group's first row comes due, once a claim found none due yet
-- (rows scheduled for later, on the batch lane, backing off): the claim's
-- walk steps over the group until then.  NULL: not known (rows joined since).
ALTER TABLE ai_marking_fair ADD COLUMN due_at timestamptz;
