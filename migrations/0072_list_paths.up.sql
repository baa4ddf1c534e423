-- aiqueue 0072: one assignment's or one group's queue list reaches its rows
-- directly (docs/performance.md, "A year of a district").
--
-- The list reads each phase newest first (functions/82_rows.sql
-- aiqueue_page_older).  With an assignment filter it walked
-- (assignment_id, created_at) and checked each row's phase: every row of the
-- assignment for a phase it has few rows in (656 ms p95 at 10,000,000 rows);
-- with a group filter, the whole phase's list index.  Keyed on the phase after
-- the assignment (or group), each phase is one range of its own.  `phase`
-- changes only when a row is enqueued, ends or is retried, never on a claim or
-- heartbeat, so these keep the claim's update heap-only (migration 0067).
-- The steps file builds them concurrently on a large table first.
CREATE INDEX IF NOT EXISTS ai_marking_queue_assignment_list_idx
    ON ai_marking_queue (assignment_id, phase, created_at DESC, queue_id DESC);
CREATE INDEX IF NOT EXISTS ai_marking_queue_group_list_idx
    ON ai_marking_queue ((coalesce(group_key, assignment_id)), phase, created_at DESC,
                         queue_id DESC);
-- (assignment_id, created_at) stays: an assignment's newest row across phases
-- (its run's progress, its latest run, a re-mark's defaults and payload) is its
-- first entry there.
-- Statistics for the record's phase: 0067 added it by rewriting the table,
-- and an ANALYZE waits for autovacuum's count of changed rows, which the
-- rewrite does not raise (the lists' plans are chosen by phase).
ANALYZE ai_marking_queue;
