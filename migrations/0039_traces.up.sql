-- One trace per job (docs/tracing.md): the W3C traceparent of the job's
-- enqueue span, with its kind and pool, so a claim, a dispatch or a result in
-- another instance or invocation continues the same trace.  Written only at
-- the enqueue, and only while tracing is on; a table of its own, keyed by the
-- row, so the queue gains no column and no index.  Removed with its row.
CREATE TABLE ai_marking_traces (
    queue_id uuid PRIMARY KEY REFERENCES ai_marking_queue (queue_id) ON DELETE CASCADE,
    traceparent text NOT NULL,
    kind text NOT NULL,
    pool text NOT NULL
);
