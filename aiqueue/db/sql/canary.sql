-- Drift canaries (docs/canaries.md; rules in functions/89_canary.sql, queue/canary.py).

-- canary_start --
-- Start kind $1's canary (pool $2, trigger $3, lane $4, up to $5 rows; $6/$7 the
-- model and function version a model_change was seen with; $8 max_share; $9 the
-- lane's share of the live price).  No row: one is running already.
SELECT r.* FROM aiqueue_canary_start($1::text, $2::text, $3::text, $4::text, $5::integer,
                                     $6::text, $7::text, $8::float8, $9::float8) r
WHERE r.run_id IS NOT NULL;

-- canary_take --
-- Kind $1's canary rows to send now, marked sent: at the back of the fair turns, so
-- only while no group of the kind's pool ($2; its kinds $4, the claim plan $5) has a
-- row the claim could take (aiqueue_due_exists, 40_fair.sql), and at most $3 (the
-- pool's slots) minus the canary rows already out and, when $6 (the pool has a cap),
-- its rows at the function.  Locked SKIP LOCKED, so two
-- instances never send one row twice.  A row whose submission is gone fails.
WITH due AS (
    SELECT c.id FROM ai_marking_canary_rows c
    JOIN ai_marking_canary_runs r ON r.run_id = c.run_id
    WHERE r.kind = $1::text AND r.state = 'running' AND c.state = 'pending'
      AND r.lane = 'live'
      AND NOT aiqueue_due_exists($4::text[], $5::jsonb, NULL)
    ORDER BY c.assignment_id, c.id
    LIMIT greatest($3::integer - (SELECT count(*) FROM ai_marking_canary_rows x
                                  JOIN ai_marking_canary_runs y ON y.run_id = x.run_id
                                  WHERE y.pool = $2::text AND x.state = 'sent'
                                    AND y.lane = 'live')
                   -- the pool's rows at the function hold their slots (a capped pool)
                   - CASE WHEN $6::boolean THEN (SELECT count(*) FROM ai_marking_claimed q
                                                 WHERE q.pool = $2::text)
                          ELSE 0 END, 0)
    FOR UPDATE OF c SKIP LOCKED
),
sent AS (
    UPDATE ai_marking_canary_rows c
    SET state = CASE WHEN s.id IS NULL THEN 'failed' ELSE 'sent' END,
        sent_at = now(), answered_at = CASE WHEN s.id IS NULL THEN now() END,
        error = CASE WHEN s.id IS NULL THEN 'submission_gone' END
    FROM due LEFT JOIN ai_marking_canary_rows k ON k.id = due.id
    LEFT JOIN submissions s ON s.id = k.submission_id
    WHERE c.id = due.id
    RETURNING c.*, s.content, s.id IS NOT NULL AS known
)
SELECT s.id, s.run_id, s.submission_id, s.assignment_id, s.payload::text AS payload,
       s.content
FROM sent s WHERE s.known;

-- canary_answer --
-- A canary row's answer ($2 marks, $3 usage) or failure ($4), priced by $5 (money);
-- the run's id when it was new.
SELECT aiqueue_canary_answer($1::uuid, $2::jsonb, $3::jsonb, $4::text, $5::jsonb) AS run_id;

-- canary_timeouts --
-- Canary rows out longer than $1 seconds fail (a canary sends each row once); on the
-- batch lane, once the provider's window (24 h) and an hour have passed.
UPDATE ai_marking_canary_rows c SET state = 'failed', answered_at = now(), error = 'timeout'
FROM ai_marking_canary_runs r
WHERE r.run_id = c.run_id AND c.state = 'sent'
  AND c.sent_at < now() - CASE WHEN r.lane = 'batch' THEN interval '25 hours'
                               ELSE make_interval(secs => $1::float8) END
RETURNING c.run_id;

-- canary_batch_runs --
-- Canaries on the batch lane with work at the provider: running ones, and finished
-- ones whose batch is not deleted yet.
SELECT r.run_id, r.kind, r.pool, r.state, r.batch_state, r.batch_tag, r.batch_id,
       r.batch_files, r.batch_at, r.rows
FROM ai_marking_canary_runs r
WHERE r.lane = 'batch' AND (r.state = 'running' OR r.batch_state IN ('submitting',
                                                                      'submitted', 'deleting'))
ORDER BY r.started_at;

-- canary_batch_take --
-- Run $1's rows for its provider batch, marked sent, once: the run is recorded
-- 'submitting' with its tag ($2) first.  No row: it was taken already.
WITH run AS (
    UPDATE ai_marking_canary_runs r SET batch_state = 'submitting', batch_tag = $2::text,
                                        batch_at = now()
    WHERE r.run_id = $1::uuid AND r.batch_state IS NULL AND r.state = 'running'
    RETURNING r.run_id
),
sent AS (
    UPDATE ai_marking_canary_rows c SET state = 'sent', sent_at = now()
    FROM run WHERE c.run_id = run.run_id AND c.state = 'pending'
    RETURNING c.*
)
SELECT s.id, s.run_id, s.submission_id, s.assignment_id, s.payload::text AS payload,
       sub.content
FROM sent s JOIN submissions sub ON sub.id = s.submission_id
ORDER BY s.id;

-- canary_batch_record --
-- Run $1's provider batch: its state $2, and (when given) its id $3 and files $4.
UPDATE ai_marking_canary_runs r
SET batch_state = $2::text, batch_id = coalesce($3::text, r.batch_id),
    batch_files = coalesce($4::text[], r.batch_files)
WHERE r.run_id = $1::uuid;

-- canary_fail_open --
-- Run $1's rows still out end failed with code $2 (its batch ended without them).
UPDATE ai_marking_canary_rows c SET state = 'failed', answered_at = now(), error = $2::text
WHERE c.run_id = $1::uuid AND c.state IN ('pending', 'sent')
RETURNING c.id;

-- canary_running --
-- The running canaries, with how many of their rows are still open.
SELECT r.run_id, r.kind, r.lane,
       (SELECT count(*) FROM ai_marking_canary_rows c
        WHERE c.run_id = r.run_id AND c.state IN ('pending', 'sent')) AS open
FROM ai_marking_canary_runs r WHERE r.state = 'running';

-- canary_rows --
-- Run $1's answered rows: the canary's marks and the teacher's, the model and the
-- function version each reported (marks only, never feedback).
SELECT c.id, c.marks::text AS marks, c.teacher::text AS teacher, c.model, c.function_version
FROM ai_marking_canary_rows c WHERE c.run_id = $1::uuid AND c.state = 'answered'
ORDER BY c.id;

-- canary_yardstick --
-- Kind $1's yardstick: its newest canary that passed or that an operator accepted.
SELECT r.* FROM ai_marking_canary_runs r
WHERE r.kind = $1::text AND r.state = 'finished' AND (r.passed OR r.accepted_at IS NOT NULL)
ORDER BY greatest(r.finished_at, r.accepted_at) DESC LIMIT 1;

-- canary_finish --
SELECT r.* FROM aiqueue_canary_finish($1::uuid, $2::float8, $3::float8, $4::text, $5::text,
                                      $6::uuid, $7::float8, $8::float8, $9::boolean,
                                      $10::float8, $11::float8) r
WHERE r.run_id IS NOT NULL;

-- canary_accept --
SELECT r.* FROM aiqueue_canary_accept($1::text, $2::text) r WHERE r.run_id IS NOT NULL;

-- canary_runs --
-- Canary runs, newest first: of kind $1 (NULL: every kind), at most $2.
SELECT r.* FROM ai_marking_canary_runs r
WHERE $1::text IS NULL OR r.kind = $1::text
ORDER BY r.started_at DESC, r.run_id LIMIT $2::integer;

-- canary_latest --
-- Each kind's newest canary run (for /ai-queue and the schedule), with its open drift.
SELECT DISTINCT ON (r.kind) r.*,
       (SELECT a.opened_at FROM ai_queue_alerts a
        WHERE a.alert = 'drift' AND a.kind = r.kind AND a.resolved_at IS NULL) AS drift_since
FROM ai_marking_canary_runs r
ORDER BY r.kind, r.started_at DESC;

-- canary_drift_open --
-- Whether kind $1 has an open drift alert (the enqueue's gate).
SELECT EXISTS (SELECT 1 FROM ai_queue_alerts a
               WHERE a.alert = 'drift' AND a.kind = $1::text AND a.resolved_at IS NULL);

-- canary_model_seen --
-- The newest result of kind $1 applied since $2 whose model or function version is
-- unlike $3/$4 (the yardstick's) and unlike $5/$6 (the last canary's); no row: none.
SELECT m.model, q.usage ->> 'function_version' AS function_version
FROM ai_marking_results m LEFT JOIN ai_marking_queue q ON q.queue_id = m.queue_id
WHERE m.kind = $1::text AND m.applied_at > $2::timestamptz
  AND (m.model IS DISTINCT FROM $3::text
       OR (q.usage ->> 'function_version') IS DISTINCT FROM $4::text)
  AND (m.model IS DISTINCT FROM $5::text
       OR (q.usage ->> 'function_version') IS DISTINCT FROM $6::text)
ORDER BY m.applied_at DESC LIMIT 1;

-- canary_reviewed --
-- How many reviewed results kind $1's canaries could draw from (the doctor's count).
SELECT count(*) FROM aiqueue_canary_set($1::text, $2::integer);
