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

-- The change feed behind live events: one row per status change, written by
-- triggers (db/sql/functions.sql) so no query can forget it.
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
