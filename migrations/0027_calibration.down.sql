-- Back to the schema before 0027.  The trigger and the gate's functions go first:
-- the trigger's condition names the calibration column (the next `migrate up`
-- re-creates them from db/sql/functions/88_calibration.sql).
DROP TRIGGER IF EXISTS ai_marking_queue_calibration ON ai_marking_queue;
DROP FUNCTION IF EXISTS aiqueue_calibration_ended();
DROP FUNCTION IF EXISTS aiqueue_calibration_sweep();
DROP FUNCTION IF EXISTS aiqueue_calibration_ready(uuid);
DROP FUNCTION IF EXISTS aiqueue_marks(jsonb);
-- The outbox keeps its pattern check (a later migration's events may be in it).
DELETE FROM ai_marking_outbox WHERE type = 'marking.calibration_ready';
-- Held rows go back to their own time before the columns go.
UPDATE ai_marking_queue SET run_after = held_run_after WHERE held_run_after IS NOT NULL;
DROP INDEX IF EXISTS ai_marking_queue_calibration_idx;
DROP INDEX IF EXISTS ai_marking_queue_held_idx;
ALTER TABLE ai_marking_queue DROP COLUMN IF EXISTS held_run_after,
    DROP COLUMN IF EXISTS calibration;
DROP TABLE IF EXISTS ai_marking_runs;
