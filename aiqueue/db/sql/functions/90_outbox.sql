-- Notifications: the outbox written by the moves that end a row.
-- An event for the host app goes to ai_marking_outbox in the transaction of the
-- status change that causes it; aiqueue/notify/delivery.py delivers it later.
--
-- Every function that ends a row (a result, a failure, a refusal given up,
-- stuck recovery, a cancel of one row or of an assignment's rest, an expiry,
-- an operator's action) calls aiqueue_outbox_moved after its move
-- (74_moved.sql), in that move's transaction, so an event exists exactly when
-- its change committed.
--
-- Always written, whether or not QUEUE_NOTIFY_URL is set: a flag in the
-- database set at start-up would let one instance started without the
-- variable (an old deployment still serving, a one-off command) switch events
-- off for every other one, and lose them.  The outbox is small (one row per
-- failed row and per finished run, against one change-feed row per status
-- change) and the delivery step prunes it: events nobody could deliver go
-- after the 24 h retry window, delivered and given-up ones after
-- QUEUE_PRUNE_AFTER_DAYS.

-- Whether this transaction wrote the run's marking.run_finished already.
CREATE OR REPLACE FUNCTION aiqueue_outbox_run_written(p_run uuid) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM ai_marking_outbox o
                   WHERE o.type = 'marking.run_finished' AND o.run_id = p_run
                     AND o.tx = pg_current_xact_id())
$$;

-- A run has ended when none of its rows is pending or processing: write its
-- marking.run_finished once per transaction.  A move asks once per run it
-- ended rows of (a cancel of 10,000 rows asks once).
-- Counts, tokens and cost over the run as GET .../progress reports them.
--
-- Two transactions ending a run's last two rows at once would each still see
-- the other's row live (READ COMMITTED) and neither would write the event.
-- Only an end that can finish the run has to be serialised against the others
-- (before, every end took the claim's advisory lock, which every claim holds
-- too):
--   * An end that finds another row of its run processing and holds no lock
--     on it (SKIP LOCKED) pins that row (FOR SHARE) and writes nothing: the run
--     cannot finish before that row ends, and whoever ends it waits for this
--     transaction to commit, so its own test sees this end.  Only processing
--     rows are pinned: a pinned pending row would be stepped over by claims.
--   * Any other end (no such row: the run may be finishing) takes the claim's
--     advisory lock and tests again; the lock holders see each other's commits,
--     and see pinned rows live (they are).
-- Why this cannot deadlock: a pinned row's ender waits for the pinner, but
-- every statement that ends a processing row locks it first (a result, a
-- failure, a refusal) or skips it (recover_stuck: SKIP LOCKED), so it holds
-- nothing a pinner waits for.  The claim lock is still taken after row locks
-- and its holder never waits for a queue row (SKIP LOCKED); a statement that
-- writes rows the claim writes too (turn counters, spend, the budget window)
-- takes the claim lock before them (aiqueue_result, aiqueue_money_refund),
-- so those rows are always locked in the claim's order.  `p_locked`: the
-- caller takes the claim lock right after this end anyway (a result,
-- aiqueue_result): then the lock, not a pin, and one look for a live row.
CREATE OR REPLACE FUNCTION aiqueue_outbox_run_finished(p_run uuid, p_assignment text,
                                                       p_locked boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    witness uuid;
BEGIN
    IF NOT p_locked THEN
        IF aiqueue_outbox_run_written(p_run) THEN
            RETURN;
        END IF;
        SELECT q.queue_id INTO witness FROM ai_marking_queue_live q
        WHERE q.run_id = p_run AND q.status = 'processing' LIMIT 1
        FOR SHARE SKIP LOCKED;
        IF witness IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;
    PERFORM aiqueue_claim_lock();
    IF EXISTS (SELECT 1 FROM ai_marking_queue_live q
               WHERE q.run_id = p_run AND q.phase = 'live') THEN
        RETURN;
    END IF;
    -- A result's end (p_locked) reads the outbox only now: most of a run's
    -- results leave live rows behind them, and the outbox's indexes stay
    -- unopened (five relation locks fewer per settle).
    IF p_locked AND aiqueue_outbox_run_written(p_run) THEN
        RETURN;
    END IF;
    INSERT INTO ai_marking_outbox (type, assignment_id, run_id, body)
    SELECT 'marking.run_finished', p_assignment, p_run, jsonb_build_object(
               'type', 'marking.run_finished', 'assignment_id', p_assignment,
               'run_id', p_run, 'completed', c.completed, 'failed', c.failed,
               'cancelled', c.cancelled, 'expired', c.expired, 'tokens', u.tokens,
               'cost_usd', u.cost_usd,
               'started_at', c.started_at, 'finished_at', now())
           || aiqueue_remark_finished(p_run)  -- a re-mark's run (77_remark)
    FROM (SELECT count(*) FILTER (WHERE q.status = 'completed') AS completed,
                 count(*) FILTER (WHERE q.status = 'failed') AS failed,
                 count(*) FILTER (WHERE q.status = 'cancelled') AS cancelled,
                 count(*) FILTER (WHERE q.status = 'expired') AS expired,
                 min(q.created_at) AS started_at
          FROM ai_marking_queue q
          WHERE q.assignment_id = p_assignment AND q.run_id = p_run) c,
         (SELECT coalesce(sum(coalesce(m.prompt_tokens, 0) + coalesce(m.completion_tokens, 0)),
                          0)::bigint AS tokens,
                 sum(m.cost_usd) AS cost_usd
          FROM ai_marking_results m WHERE m.run_id = p_run) u;
END
$$;

-- Rows that moved, one statement's (74_moved.sql): marking.row_failed for each
-- that failed (the error is the row's content-free last_error code),
-- marking.row_expired for each that expired (docs/operating/alerts.md; the same
-- body, error 'expired'), then, once per run whose rows ended here, the run's
-- end test (in run order, so two such moves take their pins in one order).
CREATE OR REPLACE FUNCTION aiqueue_outbox_moved(moved ai_marking_queue[], was text[],
                                                p_locked boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_outbox (type, assignment_id, run_id, queue_id, body)
    SELECT 'marking.row_' || m.status, m.assignment_id, m.run_id, m.queue_id,
           jsonb_build_object('type', 'marking.row_' || m.status, 'queue_id', m.queue_id,
                              'submission_id', m.submission_id,
                              'assignment_id', m.assignment_id, 'error', m.last_error)
           || jsonb_strip_nulls(jsonb_build_object(  -- none: the empty payload
                  'payload_version', aiqueue_payload_version(m.payload_id)))
    FROM unnest(moved) WITH ORDINALITY AS m
    WHERE m.status IN ('failed', 'expired') AND was[m.ordinality] IS DISTINCT FROM m.status;
    PERFORM aiqueue_outbox_run_finished(r.run_id, r.assignment_id, p_locked)
    FROM (SELECT DISTINCT m.run_id, m.assignment_id
          FROM unnest(moved) WITH ORDINALITY AS m
          WHERE was[m.ordinality] IN ('pending', 'processing')
            AND m.status NOT IN ('pending', 'processing')
          ORDER BY m.run_id) r;
END
$$;
