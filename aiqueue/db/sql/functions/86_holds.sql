-- Review holds (docs/review-holds.md): a result the marker was unsure of.
--
-- The result arrives as any other (aiqueue_result applies it) with
-- "review_required": true and "review": {"reason", "question"?, "best_guess"?}
-- (queue/holds.py builds it from the webhook item's `review`).  aiqueue_hold,
-- called by aiqueue_result once the result is applied, records the hold and
-- tells the host, in the result's transaction.  A held result is an applied,
-- unreviewed result: no agreement figure reads it until a teacher reviews it.

-- The id of a question within the payload it was asked under: the same words
-- (Unicode NFKC, case and runs of white space aside) under the same payload
-- are one question, however many rows ask it.  From the payload's sha256, not
-- its row id, so a payload pruned and stored again keeps its questions.
CREATE OR REPLACE FUNCTION aiqueue_question_id(p_payload_id bigint, p_question text)
RETURNS uuid LANGUAGE sql STABLE AS $$
    SELECT md5(encode(coalesce((SELECT p.sha256 FROM ai_marking_payloads p
                                WHERE p.id = p_payload_id),
                               sha256(convert_to('{}', 'UTF8'))), 'hex')
               || E'\n' || lower(regexp_replace(btrim(normalize(p_question, NFKC)),
                                                '\s+', ' ', 'g')))::uuid
$$;

-- A held result, applied as row `r`: its hold, and marking.review_needed for
-- the host with ids and the reason only (the question is content: never in a
-- notification).  Nothing for any other result.
CREATE OR REPLACE FUNCTION aiqueue_hold(r ai_marking_queue, p_result jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    why text := p_result -> 'review' ->> 'reason';
    asked uuid;
BEGIN
    IF p_result -> 'review_required' IS DISTINCT FROM 'true'::jsonb
       OR why IS NULL OR why NOT IN ('clarification', 'suspected_injection', 'low_confidence')
       OR (why = 'clarification') <> (jsonb_typeof(p_result -> 'review' -> 'question') = 'string')
    THEN
        RETURN;
    END IF;
    -- A result under an older rubric than the mark it would replace is recorded,
    -- not applied (77_remark): nothing to hold.
    IF NOT EXISTS (SELECT 1 FROM ai_marking_results m WHERE m.queue_id = r.queue_id AND m.applied)
    THEN
        RETURN;
    END IF;
    IF why = 'clarification' THEN
        asked := aiqueue_question_id(r.payload_id, p_result -> 'review' ->> 'question');
    END IF;
    INSERT INTO ai_marking_holds (queue_id, submission_id, assignment_id, payload_id, reason,
                                  question_id)
    VALUES (r.queue_id, r.submission_id, r.assignment_id, r.payload_id, why, asked)
    ON CONFLICT (queue_id) DO NOTHING;
    INSERT INTO ai_marking_outbox (type, assignment_id, run_id, queue_id, body)
    VALUES ('marking.review_needed', r.assignment_id, r.run_id, r.queue_id,
            jsonb_build_object('type', 'marking.review_needed', 'queue_id', r.queue_id,
                               'submission_id', r.submission_id,
                               'assignment_id', r.assignment_id, 'reason', why,
                               'question_id', asked));
END
$$;
