-- aiqueue 0031: the budget window, counted per second.
--
-- The claim's budget check (functions/20_flow.sql: aiqueue_budget_opens_at)
-- asked every entry of a pool's window whether one more row fits: a window
-- holds one entry per dispatch, so the check grew with the throughput (10,000
-- entries at 170 jobs/s in a 60 s window).  Each second of a pool's entries
-- is also kept as one row, by a trigger on ai_marking_budget (20_flow.sql:
-- aiqueue_budget_count), so the check reads at most one row per second of
-- the window and walks the entries only when the window may be nearly full.
-- A deleted entry stays counted: the seconds never count less than the
-- entries, only more (for at most one window).
CREATE TABLE ai_marking_budget_seconds (
    pool text NOT NULL,
    -- The whole second its entries' `at` fall in.
    starts_at timestamptz NOT NULL,
    tokens bigint NOT NULL,
    requests bigint NOT NULL,
    PRIMARY KEY (pool, starts_at)
);
INSERT INTO ai_marking_budget_seconds (pool, starts_at, tokens, requests)
SELECT b.pool, date_trunc('second', b.at), sum(greatest(b.tokens, 0)), count(*)
FROM ai_marking_budget b
GROUP BY 1, 2;

-- The estimate (aiqueue_budget_estimate) reads an assignment's latest actual
-- figures in its pool: one index in that order, which the planner walks
-- backwards even before the table has statistics (with the assignment alone
-- in the key, a plan made on a new table read and sorted all of its entries).
DROP INDEX IF EXISTS ai_marking_budget_assignment_idx;
CREATE INDEX ai_marking_budget_estimate_idx
    ON ai_marking_budget (pool, assignment_id, at) WHERE actual;
