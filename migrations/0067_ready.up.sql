-- aiqueue 0067: the claimable rows in a table of their own, and the record's
-- updates heap-only (docs/architecture.md).
--
-- PostgreSQL keeps an update heap-only (no index entry written) only when no
-- index names a changed column, partial-index predicates included.  Fourteen of
-- the record's twenty indexes named `status`, so every claim and every result
-- wrote each of them again.  Now:
-- * ai_marking_ready holds one row per pending row of the record, with the
--   columns the claim's, turns', schedule's and same-answer walks read, and the
--   pending walks' indexes move there.  A trigger on the record keeps it exact
--   (aiqueue/db/sql/functions/35_ready.sql); deleting a record row deletes it.
-- * The record's own indexes name `phase`, which changes only when a row is
--   enqueued, ends or is retried: 'live' while pending or processing, else its
--   status.  A claim (pending -> processing), a heartbeat and a retry
--   (processing -> pending) name no indexed column.  Rows in flight are found
--   through their slots (ai_marking_claimed) and their batches (batch_idx).
-- * fillfactor 80: a heap-only update needs room on the row's own page.
CREATE TABLE ai_marking_ready (
    queue_id uuid PRIMARY KEY REFERENCES ai_marking_queue (queue_id) ON DELETE CASCADE,
    pool text NOT NULL,
    priority integer NOT NULL,
    grp text NOT NULL,          -- coalesce(group_key, assignment_id): the turns' group
    kind text NOT NULL,
    turn bigint NOT NULL,
    seq bigint NOT NULL,
    run_after timestamptz NOT NULL,
    lane text NOT NULL,
    not_before timestamptz,
    expires_at timestamptz,
    leader_id uuid,
    run_kind text
);

INSERT INTO ai_marking_ready (queue_id, pool, priority, grp, kind, turn, seq, run_after, lane,
                              not_before, expires_at, leader_id, run_kind)
SELECT queue_id, pool, priority, coalesce(group_key, assignment_id), kind, turn, seq, run_after,
       lane, not_before, expires_at, leader_id, run_kind
FROM ai_marking_queue WHERE status = 'pending';

-- A group's rows in turn order (the fair walk's head, its next row, whether it
-- still waits), and per kind (the head of a kind with room).
CREATE INDEX ai_marking_ready_group_idx
    ON ai_marking_ready (pool, priority, grp, turn, seq) INCLUDE (run_after);
CREATE INDEX ai_marking_ready_group_kind_idx
    ON ai_marking_ready (pool, priority, grp, kind, turn, seq) INCLUDE (run_after, expires_at);
-- Claim order over every group (the budget's next row, a pool's first turn):
-- keyed on -priority, which only those walks name, so that a group's probe
-- (priority = ...) never takes it for its own index.
CREATE INDEX ai_marking_ready_claim_idx
    ON ai_marking_ready ((-priority), turn, seq) INCLUDE (run_after);
-- Rows waiting on a time or another row: the overnight lane, not_before,
-- expiry, same-answer followers, fallback moves.  Partial: a plain live row
-- takes no entry in any of them.
CREATE INDEX ai_marking_ready_batch_wait_idx
    ON ai_marking_ready (priority DESC, seq) WHERE lane = 'batch';
CREATE INDEX ai_marking_ready_not_before_idx
    ON ai_marking_ready (not_before) WHERE not_before IS NOT NULL;
CREATE INDEX ai_marking_ready_expires_idx
    ON ai_marking_ready (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX ai_marking_ready_leader_idx
    ON ai_marking_ready (leader_id, seq) WHERE leader_id IS NOT NULL;
CREATE INDEX ai_marking_ready_fallback_idx
    ON ai_marking_ready (kind, pool) WHERE run_kind IS NOT NULL;

DROP INDEX ai_marking_queue_claim_idx;
DROP INDEX ai_marking_queue_group_idx;
DROP INDEX ai_marking_queue_group_kind_idx;
DROP INDEX ai_marking_queue_batch_wait_idx;
DROP INDEX ai_marking_queue_not_before_idx;
DROP INDEX ai_marking_queue_expires_idx;
DROP INDEX ai_marking_queue_leader_idx;
DROP INDEX ai_marking_queue_fallback_idx;
DROP INDEX ai_marking_queue_processing_run_idx;
DROP INDEX ai_marking_queue_live_run_idx;
DROP INDEX ai_marking_queue_active_uniq;
DROP INDEX ai_marking_queue_answer_idx;
DROP INDEX ai_marking_queue_list_idx;
DROP INDEX ai_marking_queue_finished_idx;

-- A generated column's stored value is what the heap-only test compares: a
-- claim leaves it 'live'.  Adding it rewrites the table once.
ALTER TABLE ai_marking_queue
    ADD COLUMN phase text NOT NULL GENERATED ALWAYS AS (
        CASE WHEN status IN ('pending', 'processing') THEN 'live' ELSE status END) STORED;
ALTER TABLE ai_marking_queue SET (fillfactor = 80);

-- The lists, newest first per phase: a row takes an entry when it is enqueued
-- and one when it ends (a retry: one more).
CREATE INDEX ai_marking_queue_list_idx
    ON ai_marking_queue (phase, created_at DESC, queue_id DESC);
-- The stats' ended rows by when they ended.
CREATE INDEX ai_marking_queue_finished_idx
    ON ai_marking_queue (phase, finished_at) WHERE finished_at IS NOT NULL;
-- A run's live rows (its progress, cancel, calibration).
CREATE INDEX ai_marking_queue_live_run_idx
    ON ai_marking_queue (run_id) WHERE phase = 'live';
-- One live row per submission and payload (the enqueue's ON CONFLICT).
CREATE UNIQUE INDEX ai_marking_queue_active_uniq
    ON ai_marking_queue (submission_id, coalesce(payload_id, 0)) WHERE phase = 'live';
-- A live leader of an answer, pending or at the function (the same answer is
-- marked once).
CREATE INDEX ai_marking_queue_answer_idx
    ON ai_marking_queue (answer_key, coalesce(group_key, assignment_id))
    WHERE answer_key IS NOT NULL AND leader_id IS NULL AND phase = 'live';
