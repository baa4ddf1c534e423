-- The calibration gate (docs/agreement.md): a run's calibration rows have all ended.
--
-- marking.calibration_ready is written once per run (ai_marking_runs.ready_at
-- guards it) in the transaction of the end that leaves no calibration row of
-- the run pending or processing.  Two ends committing at once may each still
-- see the other's row live and write nothing: the housekeeping sweep
-- (calibration.sql: calibration_sweep) calls this again for runs whose rows
-- have all ended and that have no event yet, so the event is late then, never
-- lost or doubled.  Only runs that asked for calibration have a row to lock,
-- and only their calibration rows ask (aiqueue_calibration_moved).
CREATE OR REPLACE FUNCTION aiqueue_calibration_ready(p_run uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ai_marking_queue q
               WHERE q.run_id = p_run AND q.calibration
                 AND q.phase = 'live'
                 AND q.status IN ('pending', 'processing')) THEN  -- the live part alone
        RETURN false;
    END IF;
    WITH ready AS (
        UPDATE ai_marking_runs r SET ready_at = now()
        WHERE r.run_id = p_run AND r.ready_at IS NULL
        RETURNING r.run_id, r.assignment_id, r.ready_at
    )
    INSERT INTO ai_marking_outbox (type, assignment_id, run_id, body)
    SELECT 'marking.calibration_ready', ready.assignment_id, ready.run_id,
           jsonb_build_object(
               'type', 'marking.calibration_ready', 'assignment_id', ready.assignment_id,
               'run_id', ready.run_id, 'calibration_rows', c.total,
               'completed', c.completed, 'failed', c.failed, 'cancelled', c.cancelled,
               'expired', c.expired, 'held', h.held, 'ready_at', ready.ready_at)
    FROM ready,
         LATERAL (SELECT count(*) AS total,
                         count(*) FILTER (WHERE q.status = 'completed') AS completed,
                         count(*) FILTER (WHERE q.status = 'failed') AS failed,
                         count(*) FILTER (WHERE q.status = 'cancelled') AS cancelled,
                         count(*) FILTER (WHERE q.status = 'expired') AS expired
                  FROM ai_marking_queue q WHERE q.run_id = p_run AND q.calibration) c,
         LATERAL (SELECT count(*) AS held FROM ai_marking_queue q
                  WHERE q.run_id = p_run AND q.held_run_after IS NOT NULL
                    AND q.status = 'pending') h;
    RETURN FOUND;
END
$$;

-- Calibration rows that ended (from pending or processing), one move's: their
-- runs' gates are asked once each whether every calibration row has ended
-- (called by the functions that move a row, 74_moved.sql).
CREATE OR REPLACE FUNCTION aiqueue_calibration_moved(moved ai_marking_queue[], was text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM aiqueue_calibration_ready(r.run_id)
    FROM (SELECT DISTINCT m.run_id
          FROM unnest(moved) WITH ORDINALITY AS m
          WHERE m.calibration AND was[m.ordinality] IN ('pending', 'processing')
            AND m.status NOT IN ('pending', 'processing')
          ORDER BY m.run_id) r;
END
$$;

-- A result's marks without its words: score, max_score and each criterion's id
-- and score (a criterion's comment is student-facing text, never read out).
-- NULL for NULL.  Not STRICT: the planner folds a strict call on a NULL
-- constant without asking whether the caller may execute it.
CREATE OR REPLACE FUNCTION aiqueue_marks(doc jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN doc IS NOT NULL THEN jsonb_strip_nulls(jsonb_build_object(
        'score', doc -> 'score', 'max_score', doc -> 'max_score',
        'criteria', (SELECT jsonb_agg(jsonb_build_object('id', c -> 'id', 'score', c -> 'score',
                                                         'max_score', c -> 'max_score'))
                     FROM jsonb_array_elements(CASE jsonb_typeof(doc -> 'criteria')
                                               WHEN 'array' THEN doc -> 'criteria' END) c
                     WHERE jsonb_typeof(c) = 'object'))) END
$$;

-- Housekeeping's sweep: the calibration_ready events two ends at once left
-- unwritten, then the runs whose thresholds may release their held rows
-- (unreleased, with release_when and rows still held) for the caller to measure.
CREATE OR REPLACE FUNCTION aiqueue_calibration_sweep()
RETURNS TABLE (run_id uuid, release_when text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM aiqueue_calibration_ready(r.run_id) FROM ai_marking_runs r
    WHERE r.ready_at IS NULL;
    RETURN QUERY
    SELECT r.run_id, r.release_when::text FROM ai_marking_runs r
    WHERE r.released_at IS NULL AND r.release_when IS NOT NULL
      AND EXISTS (SELECT 1 FROM ai_marking_queue q
                  WHERE q.run_id = r.run_id AND q.held_run_after IS NOT NULL
                    AND q.status = 'pending');
END
$$;
