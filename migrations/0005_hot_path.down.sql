-- Back to 0001's gate and claim.
DROP FUNCTION IF EXISTS aiqueue_settle(uuid, jsonb, jsonb, integer, integer, integer);

-- May a row be dispatched now?  Pause, busy back-off, the in-flight cap and the
-- circuit breaker in one place; when the breaker is open, one probe may run
-- after the cool-down (half-open) and only while nothing else is in flight.
CREATE OR REPLACE FUNCTION aiqueue_gate_open(cap integer, breaker_threshold integer)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT NOT c.paused
       AND (c.busy_until IS NULL OR c.busy_until <= now())
       AND (cap = 0 OR f.n < cap)
       AND (c.consecutive_failures < breaker_threshold
            OR (coalesce(c.circuit_open_until, '-infinity') <= now() AND f.n = 0))
    FROM ai_queue_control c,
         (SELECT count(*) AS n FROM ai_marking_queue WHERE lease_at IS NOT NULL) f
    WHERE c.id = 1
$$;

-- The hot statements live in plpgsql functions: without a client-side
-- prepared-statement cache (transaction poolers forbid one), plpgsql is what
-- lets the server cache their plans per backend instead of planning each call.

-- Claim exactly one due row.  The advisory lock serialises count-and-claim
-- across every instance until this transaction ends, so the in-flight cap
-- cannot be overshot; each statement below takes a fresh snapshot (READ
-- COMMITTED), so it sees what the previous lock holder committed.  `more` says
-- whether another row could be claimed right now (the caller chains on it);
-- `breaker_dirty` whether a successful dispatch must reset the breaker.
CREATE OR REPLACE FUNCTION aiqueue_claim(cap integer, breaker_threshold integer)
RETURNS TABLE (queue_id uuid, submission_id uuid, assignment_id text, attempts integer,
               dispatch_seq integer, payload text, content text, more boolean,
               breaker_dirty boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    in_flight bigint;
    ctl ai_queue_control%ROWTYPE;
BEGIN
    PERFORM pg_advisory_xact_lock(7301730173017301);
    IF NOT aiqueue_gate_open(cap, breaker_threshold) THEN
        RETURN;
    END IF;
    SELECT * INTO ctl FROM ai_queue_control c WHERE c.id = 1;
    SELECT count(*) INTO in_flight FROM ai_marking_queue p WHERE p.lease_at IS NOT NULL;
    RETURN QUERY
    WITH next AS MATERIALIZED (
        -- Walks ai_marking_queue_claim_idx in dispatch order; SKIP LOCKED steps
        -- over rows a webhook or the recovery holds right now.
        SELECT q.queue_id
        FROM ai_marking_queue q
        WHERE q.status = 'pending' AND q.run_after <= now()
        ORDER BY q.priority DESC, q.run_after, q.seq
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ),
    claimed AS (
        UPDATE ai_marking_queue q
        SET status = 'processing', attempts = q.attempts + 1, dispatch_seq = q.dispatch_seq + 1,
            started_at = now(), lease_at = now(), progress = NULL, updated_at = now()
        FROM next
        WHERE q.queue_id = next.queue_id
        RETURNING q.queue_id, q.submission_id, q.assignment_id, q.attempts, q.dispatch_seq,
                  q.payload
    ),
    history AS (
        INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt)
        SELECT cl.queue_id, cl.dispatch_seq, cl.attempts FROM claimed cl
    )
    SELECT cl.queue_id, cl.submission_id, cl.assignment_id, cl.attempts, cl.dispatch_seq,
           cl.payload::text, s.content,
           ctl.consecutive_failures < breaker_threshold
               AND (cap = 0 OR in_flight + 1 < cap)
               AND EXISTS (SELECT 1 FROM ai_marking_queue o
                           WHERE o.status = 'pending' AND o.run_after <= now()
                             AND o.queue_id <> cl.queue_id),
           ctl.consecutive_failures > 0 OR ctl.circuit_open_until IS NOT NULL
    FROM claimed cl JOIN submissions s ON s.id = cl.submission_id;
END
$$;

DROP FUNCTION IF EXISTS aiqueue_gate(ai_queue_control, bigint, integer, integer);
DROP FUNCTION IF EXISTS aiqueue_in_flight(integer);
ALTER TABLE ai_marking_queue RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor, autovacuum_analyze_threshold);
DROP INDEX ai_marking_queue_finished_idx;
CREATE INDEX ai_marking_queue_finished_idx ON ai_marking_queue (status, finished_at);

-- Back to separate event (0001) and count (0004) triggers.
CREATE OR REPLACE FUNCTION aiqueue_record_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, summary)
    VALUES (NEW.assignment_id, NEW.queue_id, NEW.submission_id, NEW.status,
            CASE WHEN NEW.status = 'completed' THEN (
                SELECT jsonb_strip_nulls(jsonb_build_object(
                    'score', s.ai_result -> 'score', 'max_score', s.ai_result -> 'max_score'))
                FROM submissions s WHERE s.id = NEW.submission_id) END);
    -- NOTIFY folds identical notifications of one transaction into one.
    PERFORM pg_notify('ai_marking', '');
    RETURN NULL;
END
$$;

CREATE FUNCTION aiqueue_count_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_counts (status, n) VALUES (OLD.status, -1), (NEW.status, 1);
    RETURN NULL;
END
$$;

CREATE TRIGGER ai_marking_queue_counts_upd
    AFTER UPDATE OF status ON ai_marking_queue
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION aiqueue_count_move();

CREATE OR REPLACE FUNCTION aiqueue_record_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status)
    SELECT assignment_id, queue_id, submission_id, status FROM new_rows ORDER BY seq;
    PERFORM pg_notify('ai_marking', '');
    RETURN NULL;
END
$$;

DROP FUNCTION IF EXISTS aiqueue_notify();
ALTER TABLE ai_queue_control DROP COLUMN IF EXISTS listened_until;
