-- Scheduled rows and expiry (docs/operating/alerts.md): the sweep, and when each comes due.

-- expire_rows --
-- Pending rows whose expires_at has passed end `expired`, using no attempt,
-- except rows held for their run's calibration (docs/agreement.md: the hold never ends a
-- row; once released, an expiry that has passed ends it at the next sweep),
-- in bounded batches (the claim already steps over them meanwhile).  What
-- follows the move (functions/74_moved.sql) writes each one's
-- marking.row_expired.  SKIP LOCKED: a row a webhook or a claim holds right
-- now is left to the next sweep.
WITH gone AS (
    SELECT q.queue_id
    FROM ai_marking_ready r JOIN ai_marking_queue q ON q.queue_id = r.queue_id
    WHERE r.expires_at <= now() AND q.status = 'pending' AND q.held_run_after IS NULL
    ORDER BY r.expires_at
    LIMIT 1000
    FOR UPDATE OF q SKIP LOCKED
),
row AS (
    UPDATE ai_marking_queue q
    SET status = 'expired', finished_at = now(), last_error = 'expired', updated_at = now(),
        queue_moves = q.queue_moves + 1
    FROM gone WHERE q.queue_id = gone.queue_id AND q.status = 'pending'
    RETURNING q.queue_id, q AS moved
),
followed AS (
    SELECT aiqueue_moved(array_agg(row.moved), array_fill('pending'::text, ARRAY[count(*)::int]))
    FROM row
),
history AS (
    INSERT INTO ai_marking_attempts (queue_id, kind, outcome, ended_at, actor)
    SELECT queue_id, 'action', 'expired', now(), 'queue' FROM row
)
SELECT count(*) AS n FROM row CROSS JOIN followed;

-- next_expiry --
-- Seconds until a pending row expires (the ticker wakes to end it on time;
-- negative: overdue; NULL: none).  A ready row's row is pending, in the live
-- part: the record is named with its key written out, so the plan opens no
-- month of ended rows (aiqueue 0078), here and in next_scheduled.
SELECT extract(epoch FROM min(r.expires_at) - now())::float8 AS seconds
FROM ai_marking_ready r JOIN ai_marking_queue q ON q.queue_id = r.queue_id
 AND q.status IN ('pending', 'processing')
WHERE r.expires_at IS NOT NULL AND q.held_run_after IS NULL;

-- next_scheduled --
-- Seconds until the next scheduled row (not_before still to come) is due, if
-- it can still be dispatched then.  A step that ends with one due soon waits
-- for it (loop.wait_out_hold).
SELECT extract(epoch FROM min(r.run_after) - now())::float8 AS seconds
FROM ai_marking_ready r JOIN ai_marking_queue q ON q.queue_id = r.queue_id
 AND q.status IN ('pending', 'processing')
WHERE r.not_before > now() AND r.run_after > now()
  AND (r.expires_at IS NULL OR r.expires_at > r.run_after) AND q.held_run_after IS NULL;
