-- aiqueue 0023: the loop's own cost (issue 27, item 8).
--
-- A row's end pins another processing row of its run instead of taking the
-- claim's advisory lock (functions.sql: aiqueue_outbox_run_finished): this
-- index finds one without walking the run's pending rows.
CREATE INDEX ai_marking_queue_processing_run_idx ON ai_marking_queue (run_id)
    WHERE status = 'processing';
