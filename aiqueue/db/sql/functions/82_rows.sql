-- A row as the queue list and the row detail show it (rows.sql: list_rows,
-- get_row): one column list for both.  A plain SQL set-returning function, which
-- the planner inlines into its caller, so the caller's filters, order and limit
-- reach ai_marking_queue's indexes as if written against the table.
CREATE OR REPLACE FUNCTION aiqueue_rows()
RETURNS TABLE (queue_id uuid, submission_id uuid, assignment_id text, status text,
               attempts integer, last_error text, created_at timestamptz,
               updated_at timestamptz, started_at timestamptz, finished_at timestamptz,
               priority integer, group_key text, kind text, pool text,
               not_before timestamptz, expires_at timestamptz, lane text,
               deadline timestamptz, resumes_at timestamptz, same_answer_as uuid,
               held boolean)
LANGUAGE sql STABLE AS $$
    SELECT q.queue_id, q.submission_id, q.assignment_id, q.status, q.attempts, q.last_error,
           q.created_at, q.updated_at, q.started_at, q.finished_at, q.priority,
           coalesce(q.group_key, q.assignment_id), q.kind, q.pool, q.not_before,
           q.expires_at, q.lane, q.deadline,
           -- A pending row of a group at a spend cap waits until then (aiqueue 0022).
           aiqueue_spend_resumes_at(q.status, q.pool, q.priority,
                                    coalesce(q.group_key, q.assignment_id)),
           q.leader_id,  -- the row whose mark it copies (aiqueue 0028)
           -- Held for its run's calibration (aiqueue 0027).
           q.held_run_after IS NOT NULL AND q.status = 'pending'
    FROM ai_marking_queue q
$$;
