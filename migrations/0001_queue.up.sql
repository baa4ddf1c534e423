-- aiqueue 0001: the queue, its attempt history, its control row and its event feed.

CREATE TABLE IF NOT EXISTS aiqueue_meta (
    key text PRIMARY KEY,
    value text NOT NULL
);

-- submissions belongs to the host app: create it only when absent (and remember
-- that we did, so the down migration drops only what it created).
DO $$
BEGIN
    IF to_regclass('submissions') IS NULL THEN
        CREATE TABLE submissions (
            id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            assignment_id text NOT NULL,
            student_name text,
            content text NOT NULL DEFAULT '',
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX submissions_assignment_idx ON submissions (assignment_id);
        INSERT INTO aiqueue_meta (key, value) VALUES ('created_submissions', 'true');
    END IF;
END
$$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                   WHERE table_name = 'submissions' AND column_name = 'ai_result') THEN
        INSERT INTO aiqueue_meta (key, value) VALUES ('added_ai_columns', 'true')
        ON CONFLICT (key) DO NOTHING;
    END IF;
END
$$;

ALTER TABLE submissions
    ADD COLUMN IF NOT EXISTS ai_result jsonb,
    ADD COLUMN IF NOT EXISTS ai_marked_at timestamptz;

CREATE TABLE ai_marking_queue (
    queue_id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- seq orders rows enqueued in one statement (they share now()).
    seq bigint GENERATED ALWAYS AS IDENTITY,
    submission_id uuid NOT NULL REFERENCES submissions (id) ON DELETE CASCADE,
    assignment_id text NOT NULL,
    run_id uuid NOT NULL,
    status text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'processing', 'completed', 'failed', 'cancelled')),
    priority integer NOT NULL DEFAULT 0,
    payload jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- attempts restarts on a manual retry; dispatch_seq never does, so a callback
    -- token names exactly one dispatch of the row.
    attempts integer NOT NULL DEFAULT 0,
    dispatch_seq integer NOT NULL DEFAULT 0,
    run_after timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    lease_at timestamptz,
    finished_at timestamptz,
    progress jsonb,
    usage jsonb,
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The claim walks this index in dispatch order and stops at the first due row.
CREATE INDEX ai_marking_queue_claim_idx
    ON ai_marking_queue (priority DESC, run_after, seq) WHERE status = 'pending';
-- At most one live row per submission; enqueue's ON CONFLICT relies on it.
CREATE UNIQUE INDEX ai_marking_queue_active_uniq
    ON ai_marking_queue (submission_id) WHERE status IN ('pending', 'processing');
-- The rows holding a dispatch slot (lease_at set): every processing row, and a
-- row a late result completed while its newer dispatch is still at the
-- function (see aiqueue_complete).  The cap counts these.
CREATE INDEX ai_marking_queue_lease_idx
    ON ai_marking_queue (lease_at) WHERE lease_at IS NOT NULL;
CREATE INDEX ai_marking_queue_finished_idx
    ON ai_marking_queue (status, finished_at);
CREATE INDEX ai_marking_queue_created_idx
    ON ai_marking_queue (created_at DESC, queue_id DESC);
CREATE INDEX ai_marking_queue_status_created_idx
    ON ai_marking_queue (status, created_at DESC, queue_id DESC);
CREATE INDEX ai_marking_queue_assignment_idx
    ON ai_marking_queue (assignment_id, created_at DESC);
CREATE INDEX ai_marking_queue_submission_idx
    ON ai_marking_queue (submission_id, created_at DESC);

CREATE TABLE ai_marking_attempts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_id uuid NOT NULL REFERENCES ai_marking_queue (queue_id) ON DELETE CASCADE,
    dispatch_seq integer NOT NULL DEFAULT 0,
    attempt integer NOT NULL DEFAULT 0,
    kind text NOT NULL DEFAULT 'dispatch' CHECK (kind IN ('dispatch', 'action')),
    started_at timestamptz NOT NULL DEFAULT now(),
    ended_at timestamptz,
    outcome text,
    error text,
    usage jsonb,
    actor text
);
CREATE INDEX ai_marking_attempts_queue_idx ON ai_marking_attempts (queue_id, id);

-- One row of shared state: serverless instances share nothing but the database.
CREATE TABLE ai_queue_control (
    id integer PRIMARY KEY CHECK (id = 1),
    paused boolean NOT NULL DEFAULT false,
    paused_by text,
    paused_at timestamptz,
    consecutive_failures integer NOT NULL DEFAULT 0,
    circuit_open_until timestamptz,
    busy_until timestamptz,
    last_prune_at timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO ai_queue_control (id) VALUES (1);

-- May a row be dispatched now?  Pause, busy back-off, the in-flight cap and the
-- circuit breaker in one place; when the breaker is open, one probe may run
-- after the cool-down (half-open) and only while nothing else is in flight.
CREATE FUNCTION aiqueue_gate_open(cap integer, breaker_threshold integer)
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
CREATE FUNCTION aiqueue_claim(cap integer, breaker_threshold integer)
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

-- Apply a result at most once: the row lock plus the status test mean a second
-- (concurrent or later) delivery finds the row completed and changes nothing.
-- A late result of an earlier dispatch still completes a row that is not done.
CREATE FUNCTION aiqueue_complete(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                                 p_dispatch_seq integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH row AS (
        SELECT q.queue_id, q.submission_id FROM ai_marking_queue q
        WHERE q.queue_id = p_queue_id AND q.status IN ('pending', 'processing', 'failed')
        FOR UPDATE
    ),
    sub AS (
        UPDATE submissions s SET ai_result = p_result, ai_marked_at = now()
        FROM row WHERE s.id = row.submission_id
        RETURNING s.id
    ),
    done AS (
        UPDATE ai_marking_queue q
        SET status = 'completed', finished_at = now(), last_error = NULL,
            usage = p_usage, updated_at = now(),
            -- A late result of an earlier dispatch: the current one is still at
            -- the function, so the row keeps its slot until that one reports
            -- or its lease runs out; otherwise the function would get one
            -- job more than the cap.
            lease_at = CASE WHEN q.status = 'processing' AND q.dispatch_seq <> p_dispatch_seq
                            THEN q.lease_at END
        FROM row, sub
        WHERE q.queue_id = row.queue_id
        RETURNING q.queue_id
    ),
    history AS (
        UPDATE ai_marking_attempts a
        SET ended_at = now(), usage = p_usage,
            outcome = CASE WHEN a.ended_at IS NULL THEN 'completed' ELSE 'completed_late' END
        FROM done
        WHERE a.queue_id = done.queue_id AND a.dispatch_seq = p_dispatch_seq
          AND a.kind = 'dispatch'
    )
    SELECT count(*) INTO n FROM done;
    IF n = 0 THEN
        -- The current dispatch of a row a late result completed: its slot is free.
        UPDATE ai_marking_queue q SET lease_at = NULL
        WHERE q.queue_id = p_queue_id AND q.status = 'completed'
          AND q.dispatch_seq = p_dispatch_seq AND q.lease_at IS NOT NULL;
    END IF;
    RETURN n > 0;
END
$$;

-- The change feed behind live events: one row per status change, written by a
-- statement-level trigger so no query can forget it.
CREATE TABLE ai_marking_events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tx xid8 NOT NULL DEFAULT pg_current_xact_id(),
    assignment_id text NOT NULL,
    queue_id uuid NOT NULL,
    submission_id uuid NOT NULL,
    status text NOT NULL,
    summary jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);
-- Rows arrive in time order and are pruned by age: a BRIN index costs next to
-- nothing per insert (an enqueue of 10,000 rows writes 10,000 events).
CREATE INDEX ai_marking_events_created_idx ON ai_marking_events USING brin (created_at);

-- An enqueue inserts thousands of rows at once: one statement-level insert.
CREATE FUNCTION aiqueue_record_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status)
    SELECT assignment_id, queue_id, submission_id, status FROM new_rows ORDER BY seq;
    PERFORM pg_notify('ai_marking', '');
    RETURN NULL;
END
$$;

-- A status change is one row on the hot path: a row-level trigger, filtered by
-- WHEN before any function call, with plans plpgsql caches (a statement-level
-- trigger joining transition tables was re-planned on every claim and result).
CREATE FUNCTION aiqueue_record_move() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER ai_marking_queue_events_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_record_inserts();
CREATE TRIGGER ai_marking_queue_events_upd
    AFTER UPDATE OF status ON ai_marking_queue
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION aiqueue_record_move();
