-- Back to the schema before 0031: the budget check walks the entries again
-- (the functions the next `up` applies).  The triggers that count the seconds
-- go first: an older migration's down may drop a column they name.
DROP TRIGGER IF EXISTS ai_marking_budget_count_ins ON ai_marking_budget;
DROP TRIGGER IF EXISTS ai_marking_budget_count_upd ON ai_marking_budget;
DROP TABLE IF EXISTS ai_marking_budget_seconds;
DROP INDEX IF EXISTS ai_marking_budget_estimate_idx;
CREATE INDEX ai_marking_budget_assignment_idx
    ON ai_marking_budget (assignment_id, at) WHERE actual;
