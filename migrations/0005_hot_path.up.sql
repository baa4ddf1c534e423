-- aiqueue 0005: the dispatch hot path in fewer, cheaper calls.
--
-- 1. The gate was a SQL function with a FROM clause: PostgreSQL cannot inline
--    that and (before 18) re-plans its body on every call, a third of the
--    claim's server time.  The rule itself is now an inlinable expression over
--    the control row and the in-flight count, which the claim reads once.
-- 2. The in-flight count and the claim's "could another row be claimed?" probe
--    walk their indexes in order: with stale statistics (a fresh table, a big
--    enqueue not yet analysed) both were planned as scans of the whole table.
-- 3. The (status, finished_at) index holds finished rows only: every query on
--    it asks for a finished_at range, and a pending or processing row (an
--    enqueue, a claim) no longer writes an entry into it.
-- 4. One row trigger per status change instead of two: the event and the count
--    deltas are written by the same function call.  NOTIFY only while some
--    instance LISTENs (it costs about 5% of a job at in-flight 1).
-- 5. aiqueue_settle applies a completed result and claims the next row in one
--    call: one round trip and one commit per job on the webhook path.

CREATE FUNCTION aiqueue_gate(ctl ai_queue_control, in_flight bigint, cap integer,
                             breaker_threshold integer)
RETURNS boolean LANGUAGE sql STABLE AS $$
    -- Pause, busy back-off, the in-flight cap and the circuit breaker; when the
    -- breaker is open, one probe may run after the cool-down (half-open) and
    -- only while nothing else is in flight.
    SELECT NOT ctl.paused
       AND (ctl.busy_until IS NULL OR ctl.busy_until <= now())
       AND (cap = 0 OR in_flight < cap)
       AND (ctl.consecutive_failures < breaker_threshold
            OR (coalesce(ctl.circuit_open_until, '-infinity') <= now() AND in_flight = 0))
$$;

-- Rows holding a slot, counted only as far as the gate needs (up to the cap;
-- up to 1 when unlimited, for the half-open breaker).  The ORDER BY keeps the
-- count on ai_marking_queue_lease_idx even when the statistics are stale: a
-- plain count(*) is planned as a scan of the whole table whenever they say many
-- rows hold a lease (e.g. before the first ANALYZE of a big enqueue).
CREATE FUNCTION aiqueue_in_flight(cap integer) RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) INTO n FROM (
        SELECT 1 FROM ai_marking_queue p WHERE p.lease_at IS NOT NULL
        ORDER BY p.lease_at LIMIT greatest(cap, 1)) leased;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION aiqueue_gate_open(cap integer, breaker_threshold integer)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    ctl ai_queue_control%ROWTYPE;
    in_flight bigint;
BEGIN
    SELECT * INTO ctl FROM ai_queue_control c WHERE c.id = 1;
    in_flight := aiqueue_in_flight(cap);
    RETURN aiqueue_gate(ctl, in_flight, cap, breaker_threshold);
END
$$;

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
    SELECT * INTO ctl FROM ai_queue_control c WHERE c.id = 1;
    in_flight := aiqueue_in_flight(cap);
    IF NOT aiqueue_gate(ctl, in_flight, cap, breaker_threshold) THEN
        RETURN;
    END IF;
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
               -- The first two due rows in dispatch order (this statement's
               -- snapshot still sees the claimed one as pending).
               AND EXISTS (SELECT 1 FROM (
                       SELECT o.queue_id FROM ai_marking_queue o
                       WHERE o.status = 'pending' AND o.run_after <= now()
                       ORDER BY o.priority DESC, o.run_after, o.seq
                       LIMIT 2) due
                   WHERE due.queue_id <> cl.queue_id),
           ctl.consecutive_failures > 0 OR ctl.circuit_open_until IS NOT NULL
    FROM claimed cl JOIN submissions s ON s.id = cl.submission_id;
END
$$;

-- A completed result, then the next claim, in one transaction.  The claim runs
-- whether or not the result was new: the gate decides whether a slot is free
-- (a late result's duplicate may find one).  Always exactly one row: `applied`,
-- and the claimed job's columns (NULL when nothing was claimed).  Locks: the
-- completion holds its row while the claim waits for the advisory lock, whose
-- holder never waits for a row lock (SKIP LOCKED), so this cannot deadlock.
CREATE FUNCTION aiqueue_settle(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                               p_dispatch_seq integer, cap integer,
                               breaker_threshold integer)
RETURNS TABLE (applied boolean, queue_id uuid, submission_id uuid, assignment_id text,
               attempts integer, dispatch_seq integer, payload text, content text,
               more boolean, breaker_dirty boolean)
LANGUAGE plpgsql AS $$
BEGIN
    applied := aiqueue_complete(p_queue_id, p_result, p_usage, p_dispatch_seq);
    RETURN QUERY SELECT applied, c.* FROM aiqueue_claim(cap, breaker_threshold) c;
    IF NOT FOUND THEN
        RETURN NEXT;
    END IF;
END
$$;

-- A queue table churns: every job updates its row twice, leaving dead index
-- entries at the front of the claim and lease indexes that each claim steps
-- over until VACUUM removes them.  Vacuum and analyse it after a few thousand
-- changes instead of after a fifth of the table (200,000 rows at a million).
ALTER TABLE ai_marking_queue SET (
    autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 2000,
    autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 2000);

DROP INDEX ai_marking_queue_finished_idx;
CREATE INDEX ai_marking_queue_finished_idx
    ON ai_marking_queue (status, finished_at) WHERE finished_at IS NOT NULL;

-- Live-event listeners announce themselves here (ChangeListener, every 20 s for
-- the next 60 s): while none does, a change writes its event row but sends no
-- NOTIFY, whose queue write and lock at every commit are otherwise wasted.
ALTER TABLE ai_queue_control ADD COLUMN listened_until timestamptz;

-- Wake live-event listeners, if any instance has one.  NOTIFY folds identical
-- notifications of one transaction into one.
CREATE FUNCTION aiqueue_notify() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ai_queue_control c WHERE c.id = 1 AND c.listened_until > now()) THEN
        PERFORM pg_notify('ai_marking', '');
    END IF;
END
$$;

-- A status change is one row on the hot path: its event (live UIs), its count
-- deltas (stats) and the wake-up of listeners, in one trigger call.
CREATE OR REPLACE FUNCTION aiqueue_record_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, summary)
    VALUES (NEW.assignment_id, NEW.queue_id, NEW.submission_id, NEW.status,
            CASE WHEN NEW.status = 'completed' THEN (
                SELECT jsonb_strip_nulls(jsonb_build_object(
                    'score', s.ai_result -> 'score', 'max_score', s.ai_result -> 'max_score'))
                FROM submissions s WHERE s.id = NEW.submission_id) END);
    INSERT INTO ai_marking_counts (status, n) VALUES (OLD.status, -1), (NEW.status, 1);
    PERFORM aiqueue_notify();
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION aiqueue_record_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status)
    SELECT assignment_id, queue_id, submission_id, status FROM new_rows ORDER BY seq;
    PERFORM aiqueue_notify();
    RETURN NULL;
END
$$;
DROP TRIGGER ai_marking_queue_counts_upd ON ai_marking_queue;
DROP FUNCTION aiqueue_count_move();
