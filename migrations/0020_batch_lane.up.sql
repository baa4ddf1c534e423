-- aiqueue 0020: the overnight lane (docs/overnight.md).
-- A row enqueued with "lane": "batch" waits `pending` until a step packs it into
-- a provider batch; its run_after is the moment it must go live instead (its
-- deadline less the margin and a live estimate), so the live claim, which only
-- takes due rows, leaves it alone until then.  Packed, it is `processing` with
-- batch_id set and no lease: it holds no slot of L and stuck recovery skips it.
ALTER TABLE ai_marking_queue
    ADD COLUMN lane text NOT NULL DEFAULT 'live' CHECK (lane IN ('live', 'batch')),
    ADD COLUMN deadline timestamptz,
    ADD COLUMN batch_id bigint;

-- The packer's walk: batch-lane rows waiting for a batch, in enqueue order.
CREATE INDEX ai_marking_queue_batch_wait_idx
    ON ai_marking_queue (priority DESC, seq) WHERE status = 'pending' AND lane = 'batch';
CREATE INDEX ai_marking_queue_batch_idx
    ON ai_marking_queue (batch_id) WHERE batch_id IS NOT NULL;

-- One provider batch.  It is recorded ('submitting') before the provider is
-- called, with its rows already moved into it, so a crash mid-packing leaves
-- a record the next step reconciles: it finds the provider's batch and keeps
-- it, or gives the rows back.  No row is ever in two batches (one batch_id per
-- row), and none that waits is in none.
CREATE TABLE ai_marking_batches (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pool text NOT NULL DEFAULT 'default',
    provider text NOT NULL CHECK (provider IN ('openai', 'anthropic')),
    model text NOT NULL,
    state text NOT NULL DEFAULT 'submitting'
        CHECK (state IN ('submitting', 'submitted', 'cancelling', 'ended', 'done', 'abandoned')),
    -- the provider's batch id and every file it keeps for it (deleted when done)
    provider_batch_id text,
    files text[] NOT NULL DEFAULT '{}',
    rows integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    submitted_at timestamptz,
    ended_at timestamptz,
    deleted_at timestamptz,
    -- taken by one step at a time (another instance skips it until then)
    look_after timestamptz NOT NULL DEFAULT now(),
    error text
);
CREATE INDEX ai_marking_batches_open_idx
    ON ai_marking_batches (look_after) WHERE state NOT IN ('done', 'abandoned');

-- A batch's lines by their dispatch: every result is matched to the dispatch
-- it answers, also for a row that left the batch (fallback: first result wins).
CREATE INDEX ai_marking_attempts_batch_idx
    ON ai_marking_attempts (dispatch_ref) WHERE dispatch_ref LIKE 'batch:%';

-- Which lane marked each applied result: the usage report and the cost card
-- split cost by lane (a batch result is priced at the pool's batch price).
ALTER TABLE ai_marking_results ADD COLUMN lane text NOT NULL DEFAULT 'live'
    CHECK (lane IN ('live', 'batch'));
