-- One row from the outside (docs/fallback-budgets-calendar.md): its result's status, and the
-- operator's cancel and fail of one row.  The rules: aiqueue/queue/one_row.py
-- (writes) and aiqueue/reads/one_row.py (the detail).  Gateway: aiqueue/db/one_row.py.

-- row_result --
-- The status of row $1's applied result, if any (never its content): its
-- review, when it was applied, the model that marked it, and whether a later
-- result of the same submission superseded it.
SELECT m.review, m.applied_at, m.model, m.kind, m.payload_version,
       EXISTS (SELECT 1 FROM ai_marking_results n
               WHERE n.submission_id = m.submission_id AND n.seq > m.seq AND n.applied)
           AS superseded
FROM ai_marking_results m WHERE m.queue_id = $1;

-- cancel_one --
-- Row $1 becomes cancelled when it is pending or processing ($2: the actor).
-- A processing row's slot is freed, as an erasure frees it, and its late
-- result finds a row that is not live (aiqueue_complete refuses it); its open
-- dispatch line ends as cancelled.  A group whose last turn was this row
-- continues where its live rows end (as cancel_pending does).  Answers the
-- status the row had, or nothing when it was neither.
WITH was AS (
    SELECT q.queue_id, q.status, q.dispatch_seq FROM ai_marking_queue q
    WHERE q.queue_id = $1 AND q.phase = 'live'
    FOR UPDATE
),
row AS (
    UPDATE ai_marking_queue q
    SET status = 'cancelled', finished_at = now(), updated_at = now(),
        queue_moves = q.queue_moves + 1
    FROM was WHERE q.queue_id = was.queue_id
    RETURNING q.queue_id, q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS group_key,
              q.turn, was.status AS was, was.dispatch_seq, q AS moved
),
-- What follows the move (functions/74_moved.sql).
followed AS (
    SELECT aiqueue_moved(array_agg(row.moved), array_agg(row.was)) FROM row
),
free AS (
    DELETE FROM ai_marking_claimed c USING row WHERE c.queue_id = row.queue_id
),
dispatch AS (
    UPDATE ai_marking_attempts a SET ended_at = now(), outcome = 'cancelled'
    FROM row
    WHERE row.was = 'processing' AND a.queue_id = row.queue_id
      AND a.dispatch_seq = row.dispatch_seq AND a.kind = 'dispatch' AND a.ended_at IS NULL
),
history AS (
    INSERT INTO ai_marking_attempts (queue_id, kind, outcome, ended_at, actor)
    SELECT queue_id, 'action', 'cancel', now(), $2 FROM row
),
regroup AS (
    UPDATE ai_marking_groups g SET last_turn = row.turn - 1, updated_at = now()
    FROM row
    WHERE row.was = 'pending' AND g.pool = row.pool AND g.priority = row.priority
      AND g.group_key = row.group_key AND row.turn >= g.last_turn
)
SELECT was FROM row CROSS JOIN followed;

-- fail_one --
-- A pending row $1 ends as failed with last_error `operator`, recorded as the
-- actor $3's action with the note $2 (read on /ai-queue only: an operator's words
-- may name a student); what follows the move (functions/74_moved.sql) notifies
-- marking.row_failed (error `operator`) as for any failure, and /metrics counts
-- it.  Answers nothing when the row was not pending.
WITH row AS (
    UPDATE ai_marking_queue q
    SET status = 'failed', finished_at = now(), updated_at = now(),
        queue_moves = q.queue_moves + 1, last_error = 'operator'
    WHERE q.queue_id = $1 AND q.status = 'pending'
    RETURNING q.queue_id, q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS group_key,
              q.turn, q AS moved
),
followed AS (
    SELECT aiqueue_moved(array_agg(row.moved), ARRAY['pending']) FROM row
),
history AS (
    INSERT INTO ai_marking_attempts (queue_id, kind, outcome, ended_at, actor, error, note)
    SELECT queue_id, 'action', 'fail', now(), $3, 'operator', $2 FROM row
),
regroup AS (
    UPDATE ai_marking_groups g SET last_turn = row.turn - 1, updated_at = now()
    FROM row
    WHERE g.pool = row.pool AND g.priority = row.priority AND g.group_key = row.group_key
      AND row.turn >= g.last_turn
),
tally AS (
    INSERT INTO ai_marking_tally (outcome, job, error)
    SELECT 'operator', 'failed', 'operator' FROM row
)
SELECT 1 FROM row CROSS JOIN followed;
