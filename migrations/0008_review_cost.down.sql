-- Back to the schema before 0008 (functions: db/sql/functions.sql, re-applied by
-- the next `migrate up`).
DROP TABLE IF EXISTS ai_marking_tally;
DROP TABLE IF EXISTS ai_marking_results;
