-- Back to the schema before 0032: the estimate's index holds the actual entries only.
ALTER TABLE ai_marking_budget RESET (fillfactor);
DROP INDEX IF EXISTS ai_marking_budget_estimate_idx;
CREATE INDEX ai_marking_budget_estimate_idx
    ON ai_marking_budget (pool, assignment_id, at) WHERE actual;
