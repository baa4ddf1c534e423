-- Back to the schema before 0037: no holds, no answers, no review_needed events.
DELETE FROM ai_marking_outbox WHERE type = 'marking.review_needed';
ALTER TABLE ai_marking_outbox DROP CONSTRAINT IF EXISTS ai_marking_outbox_type_check;
ALTER TABLE ai_marking_outbox ADD CONSTRAINT ai_marking_outbox_type_check
    CHECK (type IN ('marking.run_finished', 'marking.row_failed', 'marking.row_expired',
                    'marking.alert_opened', 'marking.alert_resolved',
                    'marking.calibration_ready', 'marking.budget_warning'));
DROP TABLE IF EXISTS ai_marking_answers;
DROP TABLE IF EXISTS ai_marking_holds;
