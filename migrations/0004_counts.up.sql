-- aiqueue 0004: per-status row counts kept as deltas, so stats never count the table.
--
-- Counting completed rows at 1,000,000 rows is a full index scan (slower than a
-- plain count(*)).  Instead every statement that inserts, changes the status of,
-- or deletes queue rows appends one delta row per status it touched; stats sum
-- the deltas, and pruning folds them into one row per status once a minute.
-- Appending (never updating a shared counter row) keeps concurrent webhooks from
-- queueing on one row lock.  Deltas commit with the change, so the sums are
-- exactly what count(*) would see in the same snapshot.  The triggers that
-- write them: db/sql/functions.sql.
CREATE TABLE ai_marking_counts (
    status text NOT NULL,
    n bigint NOT NULL
);

INSERT INTO ai_marking_counts (status, n)
SELECT status, count(*) FROM ai_marking_queue GROUP BY status;
