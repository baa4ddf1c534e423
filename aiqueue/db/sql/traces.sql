-- Each job's trace (docs/tracing.md): written once at its enqueue, read by the
-- instance that claims, dispatches or applies its result.  A table of its own
-- keyed by the row, so tracing adds no column and no index to the queue.

-- keep_traces --
-- ON CONFLICT: an enqueue repeated after a lost answer keeps the first trace.
INSERT INTO ai_marking_traces (queue_id, traceparent, kind, pool)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[])
ON CONFLICT (queue_id) DO NOTHING;

-- job_traces --
SELECT queue_id, traceparent, kind, pool FROM ai_marking_traces
WHERE queue_id = ANY($1::uuid[]);
