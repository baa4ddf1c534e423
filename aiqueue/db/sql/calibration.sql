-- The calibration gate and agreement (docs/agreement.md).

-- calibration_hold --
-- The enqueue's transaction, for a run that asked for calibration: its row in
-- ai_marking_runs ($1 run, $2 assignment, $5 rows asked, $6 release_when), the
-- calibration rows ($3) marked, and the run's other new rows ($4) held: not due
-- until the release gives them back their own run_after (a not_before, a
-- batch row's live time).  A run joined again by a later enqueue that asks
-- for calibration holds its new rows too, under the newer thresholds; one
-- that joins a run still holding its rest ($5 = 0: no calibration rows of its
-- own) holds them with the rest, and its run stays ready if it was.
WITH run AS (
    INSERT INTO ai_marking_runs AS r (run_id, assignment_id, calibration_rows, release_when)
    VALUES ($1::uuid, $2::text, $5::integer, $6::jsonb)
    ON CONFLICT (run_id) DO UPDATE
    SET calibration_rows = r.calibration_rows + EXCLUDED.calibration_rows,
        release_when = coalesce(EXCLUDED.release_when, r.release_when),
        released_at = NULL, released_by = NULL,
        ready_at = CASE WHEN EXCLUDED.calibration_rows > 0 THEN NULL ELSE r.ready_at END
    RETURNING r.run_id
),
first AS (
    UPDATE ai_marking_queue q SET calibration = true
    WHERE q.queue_id = ANY ($3::uuid[]) AND q.status = 'pending'
    RETURNING q.queue_id
),
held AS (
    -- A century: later than any claim, expiry or schedule looks (aiqueue 0027).
    -- A row held is one that cannot run now, so it follows no leader that can
    -- (docs/same-answer.md): a copy of a leader outside the hold leaves its group
    -- and is marked on its own after the release (its leader may be marked, and
    -- its group gone, long before).
    UPDATE ai_marking_queue q
    SET held_run_after = CASE WHEN q.leader_id IS NOT NULL
                                   AND NOT q.leader_id = ANY ($4::uuid[])
                              THEN greatest(now(), q.not_before)
                              ELSE q.run_after END,
        leader_id = CASE WHEN q.leader_id = ANY ($4::uuid[]) THEN q.leader_id END,
        run_after = now() + interval '100 years'
    WHERE q.queue_id = ANY ($4::uuid[]) AND q.status = 'pending'
    RETURNING q.queue_id
)
SELECT (SELECT count(*) FROM first) AS calibration, (SELECT count(*) FROM held) AS held,
       (SELECT count(*) FROM run) AS runs;

-- calibration_release --
-- The run's held rows ($1) become due at their own run_after (not before now);
-- $2 who released them.  `known`: the run asked for calibration at all.
WITH run AS (
    UPDATE ai_marking_runs r SET released_at = now(), released_by = $2::text
    WHERE r.run_id = $1::uuid AND r.released_at IS NULL
    RETURNING r.released_at
),
freed AS (
    UPDATE ai_marking_queue q
    SET run_after = greatest(q.held_run_after, now()), held_run_after = NULL,
        updated_at = now()
    WHERE q.run_id = $1::uuid AND q.held_run_after IS NOT NULL AND q.status = 'pending'
    RETURNING q.queue_id
)
SELECT (SELECT count(*) FROM freed) AS released,
       coalesce((SELECT released_at FROM run),
                (SELECT r.released_at FROM ai_marking_runs r WHERE r.run_id = $1::uuid))
           AS released_at,
       EXISTS (SELECT 1 FROM ai_marking_runs r WHERE r.run_id = $1::uuid) AS known;

-- calibration_sweep --
-- Late calibration_ready events, then the runs thresholds may release
-- (aiqueue_calibration_sweep).
SELECT run_id, release_when FROM aiqueue_calibration_sweep();

-- calibration_gate --
-- A run's gate, for its pages and its release: the rows asked, the thresholds,
-- when released and ready, and its rows by role (calibration, held) and state.
SELECT r.run_id, r.assignment_id, r.calibration_rows, r.release_when::text AS release_when,
       r.released_at, r.released_by, r.ready_at,
       count(q.*) FILTER (WHERE q.calibration) AS calibration,
       count(q.*) FILTER (WHERE q.calibration AND q.phase <> 'live')
           AS calibration_ended,
       count(q.*) FILTER (WHERE q.held_run_after IS NOT NULL AND q.status = 'pending') AS held,
       -- What a calibration row cost: the page's "about $…" for the rest.
       (SELECT avg(m.cost_usd)::float8 FROM ai_marking_results m
        WHERE m.run_id = r.run_id AND m.cost_usd IS NOT NULL) AS row_cost_usd
FROM ai_marking_runs r LEFT JOIN ai_marking_queue q ON q.run_id = r.run_id
WHERE r.run_id = $1::uuid
GROUP BY r.run_id;

-- agreement_reviews --
-- Reviewed results for the agreement figures: only the score, max_score and
-- criteria of the AI's result and the teacher's adjustment (never their text).
-- Filters: $1 assignment, $2 group, $3 kind, $4 model, $5 reviewed since,
-- $6 run, $7 only the run's calibration rows.  Applied order (ties keep it).
SELECT m.queue_id, m.submission_id, m.review, m.model, aiqueue_marks(m.result)::text AS result,
       aiqueue_marks(m.adjusted_result)::text AS adjusted
FROM ai_marking_results m
WHERE m.review <> 'unreviewed'
  AND ($1::text IS NULL OR m.assignment_id = $1::text)
  AND ($2::text IS NULL OR coalesce(m."group", m.assignment_id) = $2::text)
  AND ($3::text IS NULL OR m.kind = $3::text)
  AND ($4::text IS NULL OR m.model = $4::text)
  AND ($5::timestamptz IS NULL OR coalesce(m.accepted_at, m.reverted_at) >= $5::timestamptz)
  AND ($6::uuid IS NULL OR m.run_id = $6::uuid)
  AND (NOT $7::boolean OR EXISTS (SELECT 1 FROM ai_marking_queue q
                                  WHERE q.queue_id = m.queue_id AND q.calibration))
ORDER BY m.seq
LIMIT $8::integer;

-- calibration_rows_named --
-- The enqueue's transaction: which of the new rows ($1) mark the submissions
-- named for calibration ($2).
SELECT q.queue_id FROM ai_marking_queue q
WHERE q.queue_id = ANY ($1::uuid[]) AND q.submission_id = ANY ($2::uuid[])
ORDER BY q.seq;

-- calibration_run_holds --
-- The enqueue's transaction: does the run its rows joined ($1) hold rows for a
-- check not yet released?  (Its new rows are held with them.)
SELECT EXISTS (SELECT 1 FROM ai_marking_runs r
               WHERE r.run_id = $1::uuid AND r.released_at IS NULL) AS holds;
