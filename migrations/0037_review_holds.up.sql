-- Review holds (docs/review-holds.md): a result the marker was unsure of is
-- applied but held for a teacher, and a teacher's answer to a marker's
-- question is given once per payload.
--
-- ai_marking_holds: one row per held result, keyed by its result record
-- (ai_marking_results), so it goes with it: an erasure, the history's
-- retention.  No text here: a clarification's question is content and stays
-- in the result it came with (result -> 'review' -> 'question'), which the
-- erasure removes with the submission.  question_id names the question
-- within the payload it was asked under (86_holds.sql: aiqueue_question_id),
-- so the rows of one payload asking the same thing share it.
CREATE TABLE ai_marking_holds (
    queue_id uuid PRIMARY KEY REFERENCES ai_marking_results (queue_id) ON DELETE CASCADE,
    submission_id uuid NOT NULL,
    assignment_id text NOT NULL,
    -- the payload the row was marked under (NULL: the empty payload)
    payload_id bigint,
    reason text NOT NULL
        CHECK (reason IN ('clarification', 'suspected_injection', 'low_confidence')),
    question_id uuid,
    held_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((reason = 'clarification') = (question_id IS NOT NULL))
);
-- The teacher's list reads an assignment's holds; an answer finds its askers.
CREATE INDEX ai_marking_holds_assignment_idx ON ai_marking_holds (assignment_id, held_at);
CREATE INDEX ai_marking_holds_question_idx ON ai_marking_holds (question_id)
    WHERE question_id IS NOT NULL;
CREATE INDEX ai_marking_holds_submission_idx ON ai_marking_holds (submission_id);

-- A question answered: at most once (a question_id names one payload's).  The
-- answer becomes a marking note of the payload (queue/clarify.py), kept here
-- by the rubric it belongs to (the sha256 of the payload without its notes):
-- an enqueue of that rubric later gets every note given for it, so the next
-- class with the same payload is not asked again.  No submission is named:
-- the note is the assignment's, like its rubric.
CREATE TABLE ai_marking_answers (
    question_id uuid PRIMARY KEY,
    assignment_id text NOT NULL,
    base_sha256 bytea NOT NULL,
    note jsonb NOT NULL CHECK (jsonb_typeof(note) = 'object'),
    answered_at timestamptz NOT NULL DEFAULT now(),
    actor text
);
CREATE INDEX ai_marking_answers_base_idx ON ai_marking_answers (base_sha256, answered_at);

-- The host hears of a held result: marking.review_needed.
ALTER TABLE ai_marking_outbox DROP CONSTRAINT IF EXISTS ai_marking_outbox_type_check;
ALTER TABLE ai_marking_outbox ADD CONSTRAINT ai_marking_outbox_type_check
    CHECK (type IN ('marking.run_finished', 'marking.row_failed', 'marking.row_expired',
                    'marking.alert_opened', 'marking.alert_resolved',
                    'marking.calibration_ready', 'marking.budget_warning',
                    'marking.review_needed'));
