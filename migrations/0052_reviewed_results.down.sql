DROP INDEX IF EXISTS ai_marking_results_reviewed_idx;
