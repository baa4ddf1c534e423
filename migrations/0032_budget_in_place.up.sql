-- aiqueue 0032: a result's usage replaces its budget entry's estimate in place.
--
-- The settle of a result writes its usage over the entry the claim wrote
-- (functions/71_settle_charge.sql: aiqueue_flow_result), setting `actual`.
-- With `actual` the predicate of the estimate's index, that write could never
-- be a heap-only (HOT) update: it wrote a new entry in each of the table's four
-- indexes, once per job.  The estimate's index now holds every entry (the
-- estimate steps over the few in flight, at most the pool's cap), so no index
-- names a column the settle changes, and each page keeps room for the update.
ALTER TABLE ai_marking_budget SET (fillfactor = 70);
DROP INDEX IF EXISTS ai_marking_budget_estimate_idx;
CREATE INDEX ai_marking_budget_estimate_idx ON ai_marking_budget (pool, assignment_id, at);
