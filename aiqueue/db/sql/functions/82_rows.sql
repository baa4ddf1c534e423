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

-- The rows in flight (status processing): those at the function hold a slot
-- (ai_marking_claimed), those in a provider batch are rows of an open batch.
-- The record keeps no index of them (a claim would write it: docs/architecture.md).
-- Planned on its own, each row found from its slot or batch by the record's key:
-- statistics taken while no row was in flight would otherwise read the whole
-- record for the few that are (seq scans off: its tables are walked by index).
CREATE OR REPLACE FUNCTION aiqueue_in_flight() RETURNS TABLE (queue_id uuid)
LANGUAGE sql STABLE ROWS 10 SET enable_seqscan = off AS $$
    SELECT c.queue_id FROM ai_marking_claimed c
    JOIN ai_marking_queue q ON q.queue_id = c.queue_id
    WHERE q.status = 'processing'
    UNION ALL
    SELECT q.queue_id FROM ai_marking_batches b
    JOIN ai_marking_queue q ON q.batch_id = b.id
    WHERE b.state NOT IN ('done', 'abandoned') AND q.status = 'processing'
      AND NOT EXISTS (SELECT 1 FROM ai_marking_claimed c WHERE c.queue_id = q.queue_id)
$$;

-- The rows of a list page, by state (docs/architecture.md): ended and pending
-- rows through the list index (phase, created_at, queue_id), one walk per
-- phase (the live phase's pending rows), and the rows in flight (their slots
-- and open batches: aiqueue_in_flight); merged newest first.  With an
-- assignment or a group filter each walk is a range of that assignment's or
-- group's own list index (migration 0072: keyed on the phase after it).  Older than the cursor (p_at, p_id), at most
-- `n` rows matching the filters (NULL = any).
CREATE OR REPLACE FUNCTION aiqueue_page_older(p_status text, p_assignment text, p_group text,
                                              p_kind text, p_at timestamptz, p_id uuid,
                                              n bigint)
RETURNS TABLE (queue_id uuid, created_at timestamptz) LANGUAGE sql STABLE AS $$
    SELECT w.queue_id, w.created_at FROM (
        SELECT x.queue_id, x.created_at
        FROM unnest(ARRAY['live', 'completed', 'failed', 'cancelled', 'expired']) s (phase)
        CROSS JOIN LATERAL (
            SELECT q.queue_id, q.created_at FROM ai_marking_queue q
            WHERE q.phase = s.phase AND q.status <> 'processing'
              AND (p_assignment IS NULL OR q.assignment_id = p_assignment)
              AND (p_group IS NULL OR coalesce(q.group_key, q.assignment_id) = p_group)
              AND (p_kind IS NULL OR q.kind = p_kind)
              AND (p_at IS NULL OR (q.created_at, q.queue_id) < (p_at, p_id))
            ORDER BY q.created_at DESC, q.queue_id DESC LIMIT n) x
        WHERE p_status IS NULL OR replace(s.phase, 'live', 'pending') = p_status
        UNION ALL
        (SELECT q.queue_id, q.created_at FROM aiqueue_in_flight() f
         JOIN ai_marking_queue q ON q.queue_id = f.queue_id
         WHERE (p_status IS NULL OR p_status = 'processing')
           AND (p_assignment IS NULL OR q.assignment_id = p_assignment)
           AND (p_group IS NULL OR coalesce(q.group_key, q.assignment_id) = p_group)
           AND (p_kind IS NULL OR q.kind = p_kind)
           AND (p_at IS NULL OR (q.created_at, q.queue_id) < (p_at, p_id))
         ORDER BY q.created_at DESC, q.queue_id DESC LIMIT n)) w
    ORDER BY w.created_at DESC, w.queue_id DESC LIMIT n
$$;

-- The same walk upward: newer than the cursor, nearest it first.
CREATE OR REPLACE FUNCTION aiqueue_page_newer(p_status text, p_assignment text, p_group text,
                                              p_kind text, p_at timestamptz, p_id uuid,
                                              n bigint)
RETURNS TABLE (queue_id uuid, created_at timestamptz) LANGUAGE sql STABLE AS $$
    SELECT w.queue_id, w.created_at FROM (
        SELECT x.queue_id, x.created_at
        FROM unnest(ARRAY['live', 'completed', 'failed', 'cancelled', 'expired']) s (phase)
        CROSS JOIN LATERAL (
            SELECT q.queue_id, q.created_at FROM ai_marking_queue q
            WHERE q.phase = s.phase AND q.status <> 'processing'
              AND (p_assignment IS NULL OR q.assignment_id = p_assignment)
              AND (p_group IS NULL OR coalesce(q.group_key, q.assignment_id) = p_group)
              AND (p_kind IS NULL OR q.kind = p_kind)
              AND (q.created_at, q.queue_id) > (p_at, p_id)
            ORDER BY q.created_at, q.queue_id LIMIT n) x
        WHERE p_status IS NULL OR replace(s.phase, 'live', 'pending') = p_status
        UNION ALL
        (SELECT q.queue_id, q.created_at FROM aiqueue_in_flight() f
         JOIN ai_marking_queue q ON q.queue_id = f.queue_id
         WHERE (p_status IS NULL OR p_status = 'processing')
           AND (p_assignment IS NULL OR q.assignment_id = p_assignment)
           AND (p_group IS NULL OR coalesce(q.group_key, q.assignment_id) = p_group)
           AND (p_kind IS NULL OR q.kind = p_kind)
           AND (q.created_at, q.queue_id) > (p_at, p_id)
         ORDER BY q.created_at, q.queue_id LIMIT n)) w
    ORDER BY w.created_at, w.queue_id LIMIT n
$$;

-- Whether any row but those of submissions `p_except` names payload `p_id`.  A
-- payload's rows were all created within its window of use (first, last): one
-- probe of the list index per phase (newest first, it finds one at once while
-- any is left; a row in flight is in the live phase).
CREATE OR REPLACE FUNCTION aiqueue_payload_named(p_id bigint, p_first timestamptz,
                                                 p_last timestamptz, p_except uuid[])
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1
        FROM unnest(ARRAY['live', 'completed', 'failed', 'cancelled', 'expired']) s (phase)
        CROSS JOIN LATERAL (
            SELECT 1 FROM ai_marking_queue q
            WHERE q.phase = s.phase
              AND q.created_at BETWEEN p_first AND p_last AND q.payload_id = p_id
              AND q.submission_id <> ALL (p_except)
            ORDER BY q.created_at DESC LIMIT 1) x)
$$;
