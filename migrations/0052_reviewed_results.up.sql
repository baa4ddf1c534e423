-- The reviewed results, in applied order: /ai-queue's agreement per model and the
-- teacher page's agreement card read only these (sql/calibration.sql
-- agreement_reviews), which without an index walked every result of every month
-- (0.4 s at 1,000,000 results).  Partial: a result enters it when a teacher
-- accepts or reverts it, never on the settle's path.
CREATE INDEX ai_marking_results_reviewed_idx ON ai_marking_results (seq)
    WHERE review <> 'unreviewed';
