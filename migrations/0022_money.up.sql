-- aiqueue 0022: a shared model's money (docs/concepts.md): turns by tokens (VTC),
-- spend caps that pause, and what the estimate before Mark All reads.
--
-- Turns by tokens: one counter per pool, priority and group, charged
-- input + 2 × output estimated tokens by each dispatch and corrected by the
-- result's usage (functions.sql: aiqueue_fair_pick, aiqueue_money_result).
-- `waiting` marks the groups that have pending rows: the claim walks only
-- those, smallest counter first, and takes the group's first row by
-- ai_marking_queue_group_idx.  Triggers set it (rows inserted or back to
-- pending); the claim clears it when it takes a group's last row.
CREATE TABLE ai_marking_fair (
    pool text NOT NULL,
    priority integer NOT NULL,
    group_key text NOT NULL,
    counter float8 NOT NULL DEFAULT 0,
    waiting boolean NOT NULL DEFAULT false,
    -- The turn and seq of the group's first pending row: turns by rows
    -- (aiqueue 0007) break ties between equal counters.
    head_turn bigint NOT NULL DEFAULT 0,
    head_seq bigint NOT NULL DEFAULT 0,
    -- Bumped whenever rows join the group: the claim clears `waiting` only
    -- when no row joined since it looked (see aiqueue_fair_pick).
    joins bigint NOT NULL DEFAULT 0,
    -- The group is at a spend cap until then (a cache of ai_marking_spend).
    capped_until timestamptz,
    capped_by text,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pool, priority, group_key)
);
-- The claim's walk: waiting groups, priority first, then the smallest counter.
CREATE INDEX ai_marking_fair_walk_idx
    ON ai_marking_fair (priority DESC, counter, head_turn, head_seq) WHERE waiting;
-- A group that starts waiting with nobody waiting is lifted to the largest.
CREATE INDEX ai_marking_fair_counter_idx ON ai_marking_fair (pool, priority, counter);

-- A group's first pending row, in its turn order.
CREATE INDEX ai_marking_queue_group_idx
    ON ai_marking_queue (pool, priority, (coalesce(group_key, assignment_id)), turn, seq)
    INCLUDE (run_after)
    WHERE status = 'pending';

-- What a dispatch charged (estimated weighted tokens, estimated USD, when):
-- the result's usage corrects exactly that, a refusal gives it back.
ALTER TABLE ai_marking_queue
    ADD COLUMN charged_tokens float8,
    ADD COLUMN charged_usd float8,
    ADD COLUMN charged_at timestamptz;

-- Spend per UTC clock window (an hour, a day), per group and per pool
-- (group_key ''), only while a cap is set: a dispatch adds its estimated
-- cost, its result's cost corrects it.  Pruned after two days (queries.sql: prune).
CREATE TABLE ai_marking_spend (
    pool text NOT NULL,
    group_key text NOT NULL,
    span text NOT NULL CHECK (span IN ('hour', 'day')),
    starts_at timestamptz NOT NULL,
    usd float8 NOT NULL DEFAULT 0,
    PRIMARY KEY (pool, group_key, span, starts_at)
);
CREATE INDEX ai_marking_spend_starts_idx ON ai_marking_spend (starts_at);

-- What a row of an assignment uses, as a running mean over its recent results
-- (the claim's charge, the dry run's estimate); an assignment without one
-- borrows its pool's recent assignments', else a default.
CREATE TABLE ai_marking_estimates (
    pool text NOT NULL,
    assignment_id text NOT NULL,
    prompt_tokens float8 NOT NULL,
    completion_tokens float8 NOT NULL,
    cost_usd float8,
    model text,
    samples integer NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pool, assignment_id)
);
CREATE INDEX ai_marking_estimates_recent_idx ON ai_marking_estimates (pool, updated_at);

-- Groups that wait now (rows enqueued before this migration).
INSERT INTO ai_marking_fair (pool, priority, group_key, waiting, head_turn, head_seq)
SELECT DISTINCT ON (1, 2, 3) q.pool, q.priority, coalesce(q.group_key, q.assignment_id), true,
       q.turn, q.seq
FROM ai_marking_queue q WHERE q.status = 'pending'
ORDER BY 1, 2, 3, q.turn, q.seq;
