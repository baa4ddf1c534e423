-- aiqueue 0019: model pools and task kinds (docs/concepts.md).
--
-- A kind names what a row asks for and which function does it; a pool is one
-- model key with its own limits.  Both are stored on the row at enqueue, so
-- the claim can route and count without reading the configuration's history.
-- Without aiqueue.toml every row is kind 'mark' in pool 'default' (the
-- defaults below), exactly as before this migration.
ALTER TABLE ai_marking_queue
    ADD COLUMN kind text NOT NULL DEFAULT 'mark',
    ADD COLUMN pool text NOT NULL DEFAULT 'default';

-- The claim walks this index in dispatch order and steps over rows of kinds
-- that have no room (a kind at its cap, a held pool): kind rides along so that
-- test is read from the index entry; pool serves the enqueue's per-pool head.
DROP INDEX ai_marking_queue_claim_idx;
CREATE INDEX ai_marking_queue_claim_idx
    ON ai_marking_queue (priority DESC, turn, seq) INCLUDE (run_after, kind, pool)
    WHERE status = 'pending';

-- Slots held per pool and per kind (the pool's L, the kind's cap), counted
-- inside the claim's lock: a short range of this index each.
CREATE INDEX ai_marking_queue_pool_lease_idx
    ON ai_marking_queue (pool, kind, lease_at) WHERE lease_at IS NOT NULL;

-- One control row per pool: L, the hold, the breaker and the refusal counters
-- belong to a pool.  Row id 1 stays the 'default' pool and keeps the queue-wide
-- fields (last_prune_at, listened_until, the cron's last call); pause is
-- written to every row.  Other pools' rows are added by the claim, under its
-- advisory lock, the first time it meets the pool.
ALTER TABLE ai_queue_control DROP CONSTRAINT IF EXISTS ai_queue_control_id_check;
ALTER TABLE ai_queue_control ADD COLUMN pool text NOT NULL DEFAULT 'default';
ALTER TABLE ai_queue_control ADD CONSTRAINT ai_queue_control_pool_key UNIQUE (pool);

-- The declared budgets' window is a pool's.
ALTER TABLE ai_marking_budget ADD COLUMN pool text NOT NULL DEFAULT 'default';
CREATE INDEX ai_marking_budget_pool_idx ON ai_marking_budget (pool, at);

-- Fair turns are a pool's: a group's turns continue within its pool only.
ALTER TABLE ai_marking_groups ADD COLUMN pool text NOT NULL DEFAULT 'default';
ALTER TABLE ai_marking_groups DROP CONSTRAINT ai_marking_groups_pkey;
ALTER TABLE ai_marking_groups ADD PRIMARY KEY (pool, priority, group_key);

-- The per-status count deltas, now per kind and pool (stats' breakdown).
ALTER TABLE ai_marking_counts
    ADD COLUMN kind text NOT NULL DEFAULT 'mark',
    ADD COLUMN pool text NOT NULL DEFAULT 'default';

-- Applied results remember their kind and pool (usage by=kind|pool).
ALTER TABLE ai_marking_results
    ADD COLUMN kind text NOT NULL DEFAULT 'mark',
    ADD COLUMN pool text NOT NULL DEFAULT 'default';
