-- Alerts: their values per pool, and their evaluation.
--
-- The three conditions, per pool (aiqueue 0023; one control row per pool, and
-- the claim makes one for every pool it is configured with), measured at
-- p_now (NULL: now(); tests inject a later moment instead of waiting): the
-- oldest due row's wait (backlog_age, naming that row's kind), how long due
-- rows have waited with nothing dispatched (stalled), and the share of rows
-- that failed among those that ended in the last 15 minutes (failure_spike),
-- and the p95 processing time of the live rows completed in the last 15
-- minutes (latency; an overnight batch's hours are its plan, not a delay).
-- One row per alert and pool: its kind, value, threshold, whether it fires.
-- A waiting row is pending, not expired, and not scheduled for later: a row
-- with a not_before is no backlog until its time, and its wait starts then; a
-- batch-lane row waiting for a provider batch (docs/overnight.md) is no backlog until its
-- live time comes; a row held for its run's calibration (docs/agreement.md) is none until
-- it is released (it is never due before, so it is no stall either).  A row waiting out a retry's backoff still waits: counting
-- it out would make both alerts flap open and shut through an outage, as
-- every row goes in and out of its backoff.

-- A pool's longest-waiting row (backlog_age): rows without a not_before in
-- created order (the list index's live rows, stopping at the pool's first unexpired one),
-- and scheduled rows whose time has come.
CREATE OR REPLACE FUNCTION aiqueue_alert_oldest(p_pool text, t timestamptz)
RETURNS TABLE (since timestamptz, kind text) LANGUAGE sql STABLE AS $$
    SELECT o.since, o.kind FROM (
        (SELECT q.created_at AS since, q.kind FROM ai_marking_queue q
         WHERE q.phase = 'live' AND q.status = 'pending' AND q.pool = p_pool
           AND q.not_before IS NULL
           AND q.created_at <= t AND (q.expires_at IS NULL OR q.expires_at > t)
           AND NOT (q.lane = 'batch' AND q.run_after > t) AND q.held_run_after IS NULL
         ORDER BY q.created_at LIMIT 1)
        UNION ALL
        (SELECT r.not_before, r.kind
         FROM ai_marking_ready r JOIN ai_marking_queue_live q ON q.queue_id = r.queue_id
         WHERE r.pool = p_pool AND r.not_before <= t
           AND (r.expires_at IS NULL OR r.expires_at > t)
           AND NOT (r.lane = 'batch' AND r.run_after > t) AND q.held_run_after IS NULL
         ORDER BY r.not_before LIMIT 1)) o
    ORDER BY o.since LIMIT 1
$$;

-- How long a pool with rows waiting since `since` has dispatched nothing the
-- function took (a dispatch error or a refusal is no progress), walking the
-- attempts' primary key backwards; NULL when it is held by a refusal or paused
-- by an operator, or every due row is in a group paused at a spend cap
-- (docs/concepts.md): waiting is the plan, not a stall.
CREATE OR REPLACE FUNCTION aiqueue_alert_quiet(p_pool text, paused boolean,
                                               busy_until timestamptz, since timestamptz,
                                               t timestamptz)
RETURNS float8 LANGUAGE plpgsql STABLE AS $$
DECLARE
    last_dispatch timestamptz;
BEGIN
    IF paused OR coalesce(busy_until > t, false) OR NOT EXISTS (
        SELECT 1 FROM ai_marking_fair f
        CROSS JOIN LATERAL (
            SELECT 1 FROM ai_marking_ready q
            WHERE q.pool = f.pool AND q.priority = f.priority AND q.grp = f.group_key
              AND q.run_after <= t AND (q.expires_at IS NULL OR q.expires_at > t)
            LIMIT 1) due
        WHERE f.pool = p_pool AND f.waiting
          AND (f.capped_until IS NULL OR f.capped_until <= t)
          AND (f.due_at IS NULL OR f.due_at <= t)) THEN
        RETURN NULL;
    END IF;
    SELECT a.started_at INTO last_dispatch
    FROM ai_marking_attempts a JOIN ai_marking_queue q ON q.queue_id = a.queue_id
    WHERE a.kind = 'dispatch' AND a.outcome IS DISTINCT FROM 'dispatch_error'
      AND a.outcome IS DISTINCT FROM 'refused' AND q.pool = p_pool
    ORDER BY a.id DESC LIMIT 1;
    RETURN date_part('epoch', t - greatest(last_dispatch, since));
END
$$;

CREATE OR REPLACE FUNCTION aiqueue_alert_values(p_now timestamptz, backlog_s float8,
                                                stalled_s float8, failures_min integer,
                                                failure_rate float8, p95_s float8)
RETURNS TABLE (alert text, pool text, kind text, value float8, threshold float8,
               firing boolean)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    t timestamptz := coalesce(p_now, now());
    p record;
    oldest record;
    quiet float8;
    wait float8;
BEGIN
    FOR p IN SELECT c.pool, c.paused, c.busy_until FROM ai_queue_control c ORDER BY c.pool LOOP
        SELECT o.since, o.kind INTO oldest FROM aiqueue_alert_oldest(p.pool, t) o;
        wait := coalesce(date_part('epoch', t - oldest.since), 0);
        RETURN QUERY SELECT 'backlog_age'::text, p.pool, oldest.kind, wait, backlog_s,
                            oldest.since IS NOT NULL AND wait > backlog_s;
        quiet := CASE WHEN oldest.since IS NOT NULL
                      THEN aiqueue_alert_quiet(p.pool, p.paused, p.busy_until, oldest.since, t)
                 END;
        RETURN QUERY SELECT 'stalled'::text, p.pool, NULL::text, coalesce(quiet, 0), stalled_s,
                            coalesce(quiet > stalled_s, false);
    END LOOP;

    RETURN QUERY
    SELECT 'failure_spike'::text, c.pool, NULL::text,
           CASE WHEN e.ended > 0 THEN e.failed::float8 / e.ended ELSE 0 END, failure_rate,
           coalesce(e.failed >= failures_min AND e.failed::float8 / e.ended >= failure_rate,
                    false)
    FROM ai_queue_control c
    LEFT JOIN (SELECT q.pool, count(*) FILTER (WHERE q.phase = 'failed') AS failed,
                      count(*) AS ended
               FROM ai_marking_queue q
               WHERE q.phase IN ('completed', 'failed')
                 AND q.finished_at > t - interval '15 minutes' AND q.finished_at <= t
               GROUP BY q.pool) e ON e.pool = c.pool
    ORDER BY c.pool;

    RETURN QUERY
    SELECT 'latency'::text, c.pool, NULL::text, coalesce(l.p95, 0), p95_s,
           coalesce(l.p95 > p95_s, false)
    FROM ai_queue_control c
    LEFT JOIN (SELECT q.pool, percentile_cont(0.95) WITHIN GROUP (
                          ORDER BY date_part('epoch', q.finished_at - q.started_at)) AS p95
               FROM ai_marking_queue q
               WHERE q.phase = 'completed' AND q.lane <> 'batch'
                 AND q.finished_at > t - interval '15 minutes' AND q.finished_at <= t
               GROUP BY q.pool) l ON l.pool = c.pool
    ORDER BY c.pool;
END
$$;

-- Open the alerts that fire and resolve the open ones that no longer do, each
-- change with its event in the outbox, in one transaction.  One evaluator at a
-- time: an instance that finds the lock taken skips (the other is doing the
-- same work), and the unique index on open alerts is the wall behind it.
-- Answers one row per change: (alert, 'opened' | 'resolved').
CREATE OR REPLACE FUNCTION aiqueue_alerts_evaluate(p_now timestamptz, backlog_s float8,
                                                   stalled_s float8, failures_min integer,
                                                   failure_rate float8, p95_s float8)
RETURNS TABLE (alert text, change text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    IF NOT pg_try_advisory_xact_lock(7301730173017303) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH v AS MATERIALIZED (
        SELECT * FROM aiqueue_alert_values(p_now, backlog_s, stalled_s, failures_min,
                                           failure_rate, p95_s)
    ),
    -- One incident per alert and pool (aiqueue 0023; each names its pool, and
    -- backlog_age the kind of the row that waited longest when it opened).
    opened AS (
        INSERT INTO ai_queue_alerts (alert, pool, kind, value, threshold, opened_at)
        SELECT v.alert, v.pool, v.kind, v.value, v.threshold, coalesce(p_now, now())
        FROM v WHERE v.firing
        ON CONFLICT (alert, pool) WHERE resolved_at IS NULL AND alert <> 'drift' DO NOTHING
        RETURNING *
    ),
    -- Resolved: it no longer fires, or its pool is no longer measured.  (A drift
    -- is a canary's to open and resolve: 89_canary.sql.)
    ended AS (
        SELECT a.id, coalesce(v.value, 0) AS now_value
        FROM ai_queue_alerts a LEFT JOIN v ON v.alert = a.alert AND v.pool = a.pool
        WHERE a.resolved_at IS NULL AND NOT coalesce(v.firing, false) AND a.alert <> 'drift'
    ),
    resolved AS (
        UPDATE ai_queue_alerts a SET resolved_at = coalesce(p_now, now())
        FROM ended e WHERE a.id = e.id
        RETURNING a.*, e.now_value
    ),
    events AS (
        INSERT INTO ai_marking_outbox (type, assignment_id, body)
        SELECT 'marking.alert_opened', '', jsonb_build_object(
                   'type', 'marking.alert_opened', 'alert', o.alert, 'pool', o.pool,
                   'kind', o.kind, 'value', o.value, 'threshold', o.threshold,
                   'opened_at', o.opened_at)
        FROM opened o
        UNION ALL
        SELECT 'marking.alert_resolved', '', jsonb_build_object(
                   'type', 'marking.alert_resolved', 'alert', r.alert, 'pool', r.pool,
                   'kind', r.kind, 'value', r.now_value, 'threshold', r.threshold,
                   'opened_at', r.opened_at, 'resolved_at', r.resolved_at)
        FROM resolved r
    )
    SELECT o.alert, 'opened'::text FROM opened o
    UNION ALL
    SELECT r.alert, 'resolved'::text FROM resolved r;
END
$$;
