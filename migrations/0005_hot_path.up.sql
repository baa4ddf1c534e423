-- aiqueue 0005: the dispatch hot path in fewer, cheaper calls.
--
-- 1. The gate was a SQL function with a FROM clause: PostgreSQL cannot inline
--    that and (before 18) re-plans its body on every call, a third of the
--    claim's server time.  The rule itself is now an inlinable expression over
--    the control row and the in-flight count, which the claim reads once.
-- 2. The in-flight count and the claim's "could another row be claimed?" probe
--    walk their indexes in order: with stale statistics (a fresh table, a big
--    enqueue not yet analysed) both were planned as scans of the whole table.
-- 3. The (status, finished_at) index holds finished rows only: every query on
--    it asks for a finished_at range, and a pending or processing row (an
--    enqueue, a claim) no longer writes an entry into it.
-- 4. One row trigger per status change instead of two: the event and the count
--    deltas are written by the same function call.  NOTIFY only while some
--    instance LISTENs (it costs about 5% of a job at in-flight 1).
-- 5. aiqueue_settle applies a completed result and claims the next row in one
--    call: one round trip and one commit per job on the webhook path.
-- The functions themselves: db/sql/functions.sql; this file keeps the schema.

-- A queue table churns: every job updates its row twice, leaving dead index
-- entries at the front of the claim and lease indexes that each claim steps
-- over until VACUUM removes them.  Vacuum and analyse it after a few thousand
-- changes instead of after a fifth of the table (200,000 rows at a million).
ALTER TABLE ai_marking_queue SET (
    autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 2000,
    autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 2000);

DROP INDEX ai_marking_queue_finished_idx;
CREATE INDEX ai_marking_queue_finished_idx
    ON ai_marking_queue (status, finished_at) WHERE finished_at IS NOT NULL;

-- Live-event listeners announce themselves here (ChangeListener, every 20 s for
-- the next 60 s): while none does, a change writes its event row but sends no
-- NOTIFY, whose queue write and lock at every commit are otherwise wasted.
ALTER TABLE ai_queue_control ADD COLUMN listened_until timestamptz;

-- The row trigger that only counted: its work moved into aiqueue_record_move.
DROP TRIGGER IF EXISTS ai_marking_queue_counts_upd ON ai_marking_queue;
DROP FUNCTION IF EXISTS aiqueue_count_move();
