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
CREATE INDEX ai_marking_queue_lease_idx
    ON ai_marking_queue (lease_at) WHERE status = 'processing';
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
         (SELECT count(*) AS n FROM ai_marking_queue WHERE status = 'processing') f
    WHERE c.id = 1
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
CREATE INDEX ai_marking_events_assignment_idx ON ai_marking_events (assignment_id, id);
CREATE INDEX ai_marking_events_created_idx ON ai_marking_events (created_at);

CREATE FUNCTION aiqueue_record_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status)
        SELECT assignment_id, queue_id, submission_id, status FROM new_rows ORDER BY seq;
    ELSE
        INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, summary)
        SELECT n.assignment_id, n.queue_id, n.submission_id, n.status,
               CASE WHEN n.status = 'completed' THEN (
                   SELECT jsonb_strip_nulls(jsonb_build_object(
                       'score', s.ai_result -> 'score', 'max_score', s.ai_result -> 'max_score'))
                   FROM submissions s WHERE s.id = n.submission_id) END
        FROM new_rows n JOIN old_rows o USING (queue_id)
        WHERE n.status IS DISTINCT FROM o.status
        ORDER BY n.seq;
    END IF;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM pg_notify('ai_marking', '');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER ai_marking_queue_events_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_record_events();
CREATE TRIGGER ai_marking_queue_events_upd
    AFTER UPDATE ON ai_marking_queue REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_record_events();
