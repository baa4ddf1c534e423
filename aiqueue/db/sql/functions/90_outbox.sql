-- Notifications: the outbox written by triggers on a row's end.
-- An event for the host app goes to ai_marking_outbox in the transaction of the
-- status change that causes it; aiqueue/notify/delivery.py delivers it later.
--
-- Why triggers: every path to `failed` (a failed attempt, stuck recovery, and
-- any path added later, such as a refusal given up) and every path that ends a
-- run (a result, a failure, a cancel of one row or of an assignment's rest, an
-- operator's action) is an UPDATE of ai_marking_queue.status.  A trigger on that
-- column can't be forgotten by the next statement that adds such a path, and
-- it runs inside that statement's transaction, so an event exists exactly when
-- its change committed.  The WHEN clause keeps every other update (claims,
-- heartbeats, retries back to pending) free of any call.
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
-- marking.run_finished once per transaction (a cancel ends many rows at once).
-- Counts, tokens and cost over the run as GET .../progress reports them.
--
-- Two transactions ending a run's last two rows at once would each still see
-- the other's row live (READ COMMITTED) and neither would write the event.
-- Only an end that can finish the run has to be serialised against the others
-- (aiqueue 0023; before, every end took the claim's advisory lock, which every
-- claim holds too):
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
-- so those rows are always locked in the claim's order.  `aiqueue.end_lock` =
-- 'on' says the transaction takes the claim lock right after this end anyway (a
-- result, aiqueue_result): then the lock, not a pin, and one look for a live
-- row of the run before the test of whether the event is written.
--
-- Any other end may be one of many in one statement (a cancel of 10,000): it
-- calls this once per row, and until it commits every old row version still
-- sits in the live-run index, so looking the run up each time would cost
-- O(n^2).  So the row found live last time (`aiqueue.live_witness`: run id ->
-- row, transaction-local, so also right through a transaction pooler) is asked
-- first, by its key, then whether the event is written already; the index is
-- searched only when both say no.  (A pinned witness stays live: nobody else
-- can end it before we commit.)
CREATE OR REPLACE FUNCTION aiqueue_outbox_run_finished(p_run uuid, p_assignment text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    seen jsonb;  -- run id -> a row of that run this transaction found live
    witness uuid;
BEGIN
    IF current_setting('aiqueue.end_lock', true) = 'on' THEN
        -- One end (a result) then the claim lock anyway: the lock, one look.
        PERFORM aiqueue_claim_lock();
        SELECT q.queue_id INTO witness FROM ai_marking_queue q
        WHERE q.run_id = p_run AND q.phase = 'live' LIMIT 1;
        IF witness IS NOT NULL OR aiqueue_outbox_run_written(p_run) THEN
            RETURN;
        END IF;
    ELSE
        -- Many ends in one statement (see above): the witness first.
        seen := coalesce(nullif(current_setting('aiqueue.live_witness', true), ''), '{}');
        IF EXISTS (SELECT 1 FROM ai_marking_queue q
                   WHERE q.queue_id = (seen ->> p_run::text)::uuid
                     AND q.phase = 'live')
           OR aiqueue_outbox_run_written(p_run) THEN
            RETURN;
        END IF;
        SELECT q.queue_id INTO witness FROM ai_marking_queue q
        WHERE q.run_id = p_run AND q.status = 'processing' LIMIT 1
        FOR SHARE SKIP LOCKED;
        IF witness IS NULL THEN
            PERFORM aiqueue_claim_lock();
            SELECT q.queue_id INTO witness FROM ai_marking_queue q
            WHERE q.run_id = p_run AND q.phase = 'live' LIMIT 1;
        END IF;
        IF witness IS NOT NULL THEN
            PERFORM set_config('aiqueue.live_witness',
                               jsonb_set(seen, ARRAY[p_run::text], to_jsonb(witness))::text, true);
            RETURN;
        END IF;
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

-- A row that ended: marking.row_failed when it failed (the error is the row's
-- content-free last_error code), marking.row_expired when it expired (docs/operating/alerts.md;
-- the same body, error 'expired'), then the run's end test.
CREATE OR REPLACE FUNCTION aiqueue_outbox_on_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('failed', 'expired') THEN
        INSERT INTO ai_marking_outbox (type, assignment_id, run_id, queue_id, body)
        VALUES ('marking.row_' || NEW.status, NEW.assignment_id, NEW.run_id, NEW.queue_id,
                jsonb_build_object('type', 'marking.row_' || NEW.status,
                                   'queue_id', NEW.queue_id,
                                   'submission_id', NEW.submission_id,
                                   'assignment_id', NEW.assignment_id,
                                   'error', NEW.last_error)
                || jsonb_strip_nulls(jsonb_build_object(  -- none: the empty payload
                       'payload_version', aiqueue_payload_version(NEW.payload_id))));
    END IF;
    IF OLD.status IN ('pending', 'processing') THEN
        PERFORM aiqueue_outbox_run_finished(NEW.run_id, NEW.assignment_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER ai_marking_queue_outbox
    AFTER UPDATE OF status ON ai_marking_queue
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       AND (NEW.status = 'failed'
                            OR (OLD.status IN ('pending', 'processing')
                                AND NEW.status NOT IN ('pending', 'processing'))))
    EXECUTE FUNCTION aiqueue_outbox_on_end();
