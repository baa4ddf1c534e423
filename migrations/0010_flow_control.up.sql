-- aiqueue 0010: flow control for a shared paid model (docs/concepts.md).
--
-- The learned in-flight limit L and the refusal counters live on the one
-- control row, so every instance reads and moves the same values under the
-- claim's advisory lock (functions.sql: aiqueue_claim, aiqueue_flow_*).
-- The queue-wide hold after a refusal is the existing busy_until.
ALTER TABLE ai_queue_control
    -- NULL: at the ceiling (nothing refused since L last climbed back).
    ADD COLUMN in_flight_limit integer CHECK (in_flight_limit >= 1),
    -- Results without a refusal since L last moved: L + 1 after L of them.
    ADD COLUMN limit_clean integer NOT NULL DEFAULT 0,
    -- When L was last cut: a refusal of a dispatch sent before it belongs to
    -- the burst already answered and cuts nothing (one cut per burst).
    ADD COLUMN limit_cut_at timestamptz,
    -- aiqueue_refusals_total{kind}: counters that never go down.
    ADD COLUMN refusals_rate_limited bigint NOT NULL DEFAULT 0,
    ADD COLUMN refusals_overloaded bigint NOT NULL DEFAULT 0;

-- When a row was first refused: past QUEUE_REFUSED_GIVE_UP_SECONDS it fails.
ALTER TABLE ai_marking_queue ADD COLUMN refused_since timestamptz;

-- The declared budgets' window: one entry per dispatch while a budget is
-- declared, its estimated tokens until the result's usage replaces them.
-- Shared by every instance; entries older than a day are deleted by the claim.
CREATE TABLE ai_marking_budget (
    queue_id uuid NOT NULL,
    dispatch_seq integer NOT NULL,
    assignment_id text NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    tokens bigint NOT NULL,
    -- true once the result's usage replaced the estimate.
    actual boolean NOT NULL DEFAULT false,
    PRIMARY KEY (queue_id, dispatch_seq)
);
CREATE INDEX ai_marking_budget_at_idx ON ai_marking_budget (at);
-- The estimate reads the latest actual figures of one assignment.
CREATE INDEX ai_marking_budget_assignment_idx
    ON ai_marking_budget (assignment_id, at) WHERE actual;
