-- aiqueue 0041: a row at the function holds a slot in ai_marking_claimed
-- (docs/architecture.md).
--
-- A dispatch's lease lived on the queue row (lease_at) with two partial
-- indexes over the queue, so a claim, a heartbeat and a settle each wrote
-- them.  The slot is now a row of its own: the claim inserts it, a heartbeat
-- moves its lease, and the end of the dispatch (a result, a failure, a
-- refusal, recovery, a cancel) deletes it.  The caps count it, recovery walks
-- it.  A row a late result completed while its newer dispatch is still out
-- keeps its slot until that dispatch reports (see aiqueue_complete).  Deleting
-- a queue row (erasure, pruning) deletes its slot.
CREATE TABLE ai_marking_claimed (
    queue_id uuid PRIMARY KEY REFERENCES ai_marking_queue (queue_id) ON DELETE CASCADE,
    dispatch_seq integer NOT NULL,
    pool text NOT NULL,
    kind text NOT NULL,
    run_kind text,  -- the fallback kind that runs it (NULL: its own)
    lease_at timestamptz NOT NULL DEFAULT now()
);
-- The caps' counts (a pool's, a kind's) and recovery's walk, oldest lease first.
CREATE INDEX ai_marking_claimed_pool_idx ON ai_marking_claimed (pool, kind, lease_at);
CREATE INDEX ai_marking_claimed_lease_idx ON ai_marking_claimed (lease_at);

INSERT INTO ai_marking_claimed (queue_id, dispatch_seq, pool, kind, run_kind, lease_at)
SELECT queue_id, dispatch_seq, pool, kind, run_kind, lease_at
FROM ai_marking_queue WHERE lease_at IS NOT NULL;

DROP INDEX IF EXISTS ai_marking_queue_lease_idx;
DROP INDEX IF EXISTS ai_marking_queue_pool_lease_idx;
ALTER TABLE ai_marking_queue DROP COLUMN lease_at;
