-- Drift canaries (docs/canaries.md): a run's start (its set, or why it is skipped),
-- an answer recorded, and a run's verdict with its drift alert.  Canary rows live in
-- their own tables (migration 0038): nothing here touches a queue row, a submission
-- or a run's agreement.

-- A kind's canary set: up to p_rows reviewed results (accepted, adjusted or not),
-- the newest review per submission, spread across assignments (each assignment's
-- newest first, taken in turn), with the payload they were marked under and the
-- teacher's marks (the adjusted result, else the accepted one).
CREATE OR REPLACE FUNCTION aiqueue_canary_set(p_kind text, p_rows integer)
RETURNS TABLE (source_queue_id uuid, submission_id uuid, assignment_id text, payload jsonb,
               teacher jsonb)
LANGUAGE sql STABLE AS $$
    SELECT s.queue_id, s.submission_id, s.assignment_id, s.payload, s.teacher
    FROM (SELECT c.*, row_number() OVER (PARTITION BY c.assignment_id
                                         ORDER BY c.reviewed_at DESC) AS turn
          FROM (SELECT DISTINCT ON (m.submission_id)
                       m.queue_id, m.submission_id, m.assignment_id,
                       coalesce(p.payload, '{}'::jsonb) AS payload,
                       aiqueue_marks(coalesce(m.adjusted_result, m.result)) AS teacher,
                       m.accepted_at AS reviewed_at
                FROM ai_marking_results m
                JOIN ai_marking_queue q ON q.queue_id = m.queue_id
                JOIN submissions sub ON sub.id = m.submission_id
                LEFT JOIN ai_marking_payloads p ON p.id = q.payload_id
                WHERE m.kind = p_kind AND m.review = 'accepted'
                  AND jsonb_typeof(coalesce(m.adjusted_result, m.result) -> 'score') = 'number'
                ORDER BY m.submission_id, m.accepted_at DESC) c) s
    ORDER BY s.turn, s.reviewed_at DESC
    LIMIT p_rows
$$;

-- Start a kind's canary: NULL when one is running; else the new run, `skipped` when
-- there is nothing reviewed to draw from or when its estimated cost (the kind's mean
-- row cost over 30 days × its rows × `lane_share`, the lane's price) would take the
-- kind's canary spend over `max_share` of the kind's marking spend over 30 days.
CREATE OR REPLACE FUNCTION aiqueue_canary_start(p_kind text, p_pool text, p_trigger text,
                                                p_lane text, p_rows integer,
                                                p_model text, p_version text,
                                                max_share float8, lane_share float8)
RETURNS ai_marking_canary_runs LANGUAGE plpgsql AS $$
DECLARE
    run ai_marking_canary_runs;
    found integer;
    spend float8;
    row_cost float8;
    spent float8;
    estimate float8;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('aiqueue.canary'), hashtext(p_kind));
    IF EXISTS (SELECT 1 FROM ai_marking_canary_runs r
               WHERE r.kind = p_kind AND r.state = 'running') THEN
        RETURN NULL;
    END IF;
    INSERT INTO ai_marking_canary_runs (kind, pool, trigger, lane, trigger_model,
                                        trigger_version)
    VALUES (p_kind, p_pool, p_trigger, p_lane, p_model, p_version) RETURNING * INTO run;
    INSERT INTO ai_marking_canary_rows (run_id, source_queue_id, submission_id,
                                        assignment_id, payload, teacher)
    SELECT run.run_id, c.* FROM aiqueue_canary_set(p_kind, p_rows) c;
    GET DIAGNOSTICS found = ROW_COUNT;
    SELECT coalesce(sum(m.cost_usd), 0), avg(m.cost_usd) INTO spend, row_cost
    FROM ai_marking_results m
    WHERE m.kind = p_kind AND m.applied_at > now() - interval '30 days';
    SELECT coalesce(sum(c.cost_usd), 0) INTO spent
    FROM ai_marking_canary_rows c JOIN ai_marking_canary_runs r ON r.run_id = c.run_id
    WHERE r.kind = p_kind AND c.answered_at > now() - interval '30 days';
    estimate := coalesce(row_cost, 0) * found * lane_share;
    IF found = 0 OR (estimate > 0 AND spent + estimate > max_share * spend) THEN
        DELETE FROM ai_marking_canary_rows c WHERE c.run_id = run.run_id;
        UPDATE ai_marking_canary_runs r
        SET state = 'skipped', finished_at = now(),
            skipped = CASE WHEN found = 0 THEN 'no reviewed results of the kind to re-mark'
                      ELSE format('max_share: %s USD more would take canaries to %s USD of '
                                  'the kind''s %s USD over 30 days (max %s %%)',
                                  round(estimate::numeric, 4), round((spent + estimate)::numeric, 4),
                                  round(spend::numeric, 4), round((max_share * 100)::numeric, 2))
                      END
        WHERE r.run_id = run.run_id RETURNING * INTO run;
        RETURN run;
    END IF;
    UPDATE ai_marking_canary_runs r SET rows = found WHERE r.run_id = run.run_id
    RETURNING * INTO run;
    RETURN run;
END
$$;

-- A canary row's answer (marks only, its usage priced by the pool's prices in `money`,
-- at the batch price on the batch lane)
-- or its failure (`error`), once: a repeat changes nothing.  Returns the run's id when
-- this was the row's first answer.
CREATE OR REPLACE FUNCTION aiqueue_canary_answer(p_id uuid, p_marks jsonb, p_usage jsonb,
                                                 p_error text, money jsonb)
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    done uuid;
    priced jsonb;
BEGIN
    SELECT aiqueue_priced(CASE WHEN r.lane = 'batch' AND p_usage IS NOT NULL
                               THEN p_usage || '{"lane": "batch"}'::jsonb ELSE p_usage END,
                          money, r.pool) INTO priced
    FROM ai_marking_canary_rows c JOIN ai_marking_canary_runs r ON r.run_id = c.run_id
    WHERE c.id = p_id;
    UPDATE ai_marking_canary_rows c
    SET state = CASE WHEN p_error IS NULL THEN 'answered' ELSE 'failed' END,
        answered_at = now(), marks = p_marks, usage = priced, error = p_error,
        model = left(priced ->> 'model', 100),
        function_version = left(priced ->> 'function_version', 100),
        cost_usd = CASE WHEN jsonb_typeof(priced -> 'cost_usd') = 'number'
                        THEN (priced ->> 'cost_usd')::float8 END
    WHERE c.id = p_id AND c.state IN ('pending', 'sent')
    RETURNING c.run_id INTO done;
    RETURN done;
END
$$;

-- A run's verdict, once (a run no longer running changes nothing; NULL then): its
-- figures (models/agreement.py computes them), the yardstick it was held to, and
-- whether it passed (queue/canary.py decides).  A failed canary opens the kind's
-- `drift` alert, a passing one resolves it; each change with its event in the
-- outbox, signed and delivered like every alert's.  `drop`: the larger fall in
-- exact or qwk, the alert's value; `max_drop` its threshold.
CREATE OR REPLACE FUNCTION aiqueue_canary_finish(p_run uuid, p_exact float8, p_qwk float8,
                                                 p_model text, p_version text,
                                                 yard uuid, yard_exact float8,
                                                 yard_qwk float8, p_passed boolean,
                                                 drop float8, max_drop float8)
RETURNS ai_marking_canary_runs LANGUAGE plpgsql AS $$
DECLARE
    run ai_marking_canary_runs;
BEGIN
    UPDATE ai_marking_canary_runs r
    SET state = 'finished', finished_at = now(), exact = p_exact, qwk = p_qwk,
        model = p_model, function_version = p_version, yardstick_run = yard,
        yardstick_exact = yard_exact, yardstick_qwk = yard_qwk, passed = p_passed,
        answered = (SELECT count(*) FROM ai_marking_canary_rows c
                    WHERE c.run_id = r.run_id AND c.state = 'answered'),
        cost_usd = (SELECT sum(c.cost_usd) FROM ai_marking_canary_rows c
                    WHERE c.run_id = r.run_id)
    WHERE r.run_id = p_run AND r.state = 'running'
    RETURNING * INTO run;
    IF run.run_id IS NULL THEN
        RETURN NULL;
    END IF;
    IF p_passed THEN
        PERFORM aiqueue_canary_resolve(run.kind);
    ELSE
        WITH opened AS (
            INSERT INTO ai_queue_alerts (alert, pool, kind, value, threshold)
            VALUES ('drift', run.pool, run.kind, drop, max_drop)
            ON CONFLICT (kind) WHERE resolved_at IS NULL AND alert = 'drift' DO NOTHING
            RETURNING *
        )
        INSERT INTO ai_marking_outbox (type, assignment_id, body)
        SELECT 'marking.alert_opened', '', jsonb_build_object(
                   'type', 'marking.alert_opened', 'alert', 'drift', 'pool', o.pool,
                   'kind', o.kind, 'value', o.value, 'threshold', o.threshold,
                   'opened_at', o.opened_at, 'model', run.model,
                   'function_version', run.function_version, 'canary_run_id', run.run_id,
                   'exact', run.exact, 'qwk', run.qwk,
                   'yardstick', jsonb_build_object('run_id', yard, 'exact', yard_exact,
                                                   'qwk', yard_qwk))
        FROM opened o;
    END IF;
    RETURN run;
END
$$;

-- Resolve the kind's open drift alert (a canary passed, or an operator accepted it),
-- with its event; false when none was open.
CREATE OR REPLACE FUNCTION aiqueue_canary_resolve(p_kind text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH resolved AS (
        UPDATE ai_queue_alerts a SET resolved_at = now()
        WHERE a.alert = 'drift' AND a.kind = p_kind AND a.resolved_at IS NULL
        RETURNING a.*
    )
    INSERT INTO ai_marking_outbox (type, assignment_id, body)
    SELECT 'marking.alert_resolved', '', jsonb_build_object(
               'type', 'marking.alert_resolved', 'alert', 'drift', 'pool', r.pool,
               'kind', r.kind, 'value', r.value, 'threshold', r.threshold,
               'opened_at', r.opened_at, 'resolved_at', r.resolved_at)
    FROM resolved r;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n > 0;
END
$$;

-- An operator accepts a kind's drift: the canary that opened it (the newest
-- finished canary that failed) becomes the yardstick, and the alert resolves.
-- NULL when no drift is open.
CREATE OR REPLACE FUNCTION aiqueue_canary_accept(p_kind text, p_actor text)
RETURNS ai_marking_canary_runs LANGUAGE plpgsql AS $$
DECLARE
    run ai_marking_canary_runs;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('aiqueue.canary'), hashtext(p_kind));
    IF NOT EXISTS (SELECT 1 FROM ai_queue_alerts a
                   WHERE a.alert = 'drift' AND a.kind = p_kind AND a.resolved_at IS NULL) THEN
        RETURN NULL;
    END IF;
    UPDATE ai_marking_canary_runs r SET accepted_at = now(), accepted_by = p_actor
    WHERE r.run_id = (SELECT x.run_id FROM ai_marking_canary_runs x
                      WHERE x.kind = p_kind AND x.state = 'finished' AND NOT x.passed
                      ORDER BY x.finished_at DESC LIMIT 1)
    RETURNING * INTO run;
    PERFORM aiqueue_canary_resolve(p_kind);
    RETURN run;
END
$$;
