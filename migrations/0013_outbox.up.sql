-- aiqueue 0013: the notification outbox (docs/integrating.md).
--
-- One row per event for the host app (marking.run_finished, marking.row_failed),
-- written by a trigger in the same transaction as the status change that causes
-- it (db/sql/functions.sql, aiqueue_outbox_on_end), and delivered later by
-- aiqueue/notify.py.  The row's id is the event's `webhook-id`: it stays the
-- same on every retry.  `body` is the JSON that is POSTed, built from ids,
-- counts and content-free codes only: never a submission's content or result.
CREATE TABLE ai_marking_outbox (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    type text NOT NULL CHECK (type IN ('marking.run_finished', 'marking.row_failed')),
    assignment_id text NOT NULL,
    run_id uuid,
    queue_id uuid,
    body jsonb NOT NULL,
    -- The writing transaction: a statement that ends many rows of one run
    -- (a cancel) writes its run_finished once.
    tx xid8 NOT NULL DEFAULT pg_current_xact_id(),
    created_at timestamptz NOT NULL DEFAULT now(),
    -- waiting: not delivered yet; delivered: a 2xx; gave_up: 24 h of failures or a 410.
    state text NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'delivered', 'gave_up')),
    attempts integer NOT NULL DEFAULT 0,
    -- When the next attempt is due.  A claim moves it past the attempt's lease,
    -- so an instance that dies mid-delivery leaves the event due again then.
    next_at timestamptz NOT NULL DEFAULT now(),
    -- The last attempt's outcome, content-free: an HTTP status or an error code.
    last_outcome text,
    last_at timestamptz,
    ended_at timestamptz
);
-- Claims walk the due events in order; only waiting rows are in the index.
CREATE INDEX ai_marking_outbox_due_idx ON ai_marking_outbox (next_at) WHERE state = 'waiting';
-- The trigger's "already written in this transaction" test.
CREATE INDEX ai_marking_outbox_run_idx ON ai_marking_outbox (run_id, tx)
    WHERE type = 'marking.run_finished';
-- Pruning by age.
CREATE INDEX ai_marking_outbox_created_idx ON ai_marking_outbox (created_at);

-- "Is this run still live?": the trigger asks it each time a row ends, so it
-- must not scan an assignment's finished rows.
CREATE INDEX ai_marking_queue_live_run_idx ON ai_marking_queue (run_id)
    WHERE status IN ('pending', 'processing');
