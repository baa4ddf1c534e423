-- A teacher's review of results: accept, revert, a run at once.

-- A review action on one applied result, in the row's history (while the queue
-- still has the row) and in the live feed (the page updates its mark).
CREATE OR REPLACE FUNCTION aiqueue_review_recorded(p_queue_id uuid, action text,
                                                   p_actor text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r ai_marking_results%ROWTYPE;
BEGIN
    SELECT * INTO r FROM ai_marking_results m WHERE m.queue_id = p_queue_id;
    INSERT INTO ai_marking_attempts (queue_id, kind, outcome, ended_at, actor)
    SELECT q.queue_id, 'action', action, now(), p_actor
    FROM ai_marking_queue q WHERE q.queue_id = r.queue_id;
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, summary)
    SELECT r.assignment_id, r.queue_id, r.submission_id, 'completed',
           jsonb_strip_nulls(jsonb_build_object(
               'score', s.ai_result -> 'score', 'max_score', s.ai_result -> 'max_score',
               'review', CASE action WHEN 'accept' THEN 'accepted' ELSE 'reverted' END))
    FROM submissions s WHERE s.id = r.submission_id;
    PERFORM aiqueue_notify();
END
$$;

-- Revert one applied result: the submission's mark goes back to what it was
-- before it.  Locks the submission first, as aiqueue_complete does (after the
-- queue row, which a revert never locks), so a revert and a result for the same
-- submission serialise; every statement after the lock reads what the other
-- committed.  outcome: reverted, superseded (a later result is still applied),
-- not_completed (no applied result, or reverted already) or not_found.
CREATE OR REPLACE FUNCTION aiqueue_revert(p_queue_id uuid, p_actor text)
RETURNS TABLE (outcome text, reverted_at timestamptz) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r ai_marking_results%ROWTYPE;
BEGIN
    SELECT * INTO r FROM ai_marking_results m WHERE m.queue_id = p_queue_id;
    IF NOT FOUND THEN
        outcome := CASE WHEN EXISTS (SELECT 1 FROM ai_marking_queue q
                                     WHERE q.queue_id = p_queue_id)
                        THEN 'not_completed' ELSE 'not_found' END;
        RETURN NEXT;
        RETURN;
    END IF;
    PERFORM 1 FROM submissions s WHERE s.id = r.submission_id FOR UPDATE;
    SELECT * INTO r FROM ai_marking_results m WHERE m.queue_id = p_queue_id FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'not_found';  -- its submission was deleted meanwhile
    ELSIF r.review = 'reverted' THEN
        outcome := 'not_completed';
    ELSIF EXISTS (SELECT 1 FROM ai_marking_results l
                  WHERE l.submission_id = r.submission_id AND l.seq > r.seq
                    AND l.review <> 'reverted' AND l.applied) THEN
        outcome := 'superseded';
    ELSE
        UPDATE submissions s SET ai_result = r.previous_result,
                                 ai_marked_at = r.previous_marked_at
        WHERE s.id = r.submission_id;
        UPDATE ai_marking_results m SET review = 'reverted', reverted_at = now(),
                                        actor = p_actor
        WHERE m.queue_id = p_queue_id
        RETURNING * INTO r;
        PERFORM aiqueue_review_recorded(p_queue_id, 'revert', p_actor);
        outcome := 'reverted';
        reverted_at := r.reverted_at;
    END IF;
    RETURN NEXT;
END
$$;

-- Accept one applied result (again: a newer adjustment replaces the older one).
CREATE OR REPLACE FUNCTION aiqueue_accept(p_queue_id uuid, p_actor text, p_adjusted jsonb)
RETURNS TABLE (outcome text, accepted_at timestamptz) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r ai_marking_results%ROWTYPE;
BEGIN
    UPDATE ai_marking_results m
    SET review = 'accepted', accepted_at = now(), actor = p_actor,
        adjusted_result = coalesce(p_adjusted, m.adjusted_result)
    WHERE m.queue_id = p_queue_id AND m.review <> 'reverted'
    RETURNING * INTO r;
    IF FOUND THEN
        PERFORM aiqueue_review_recorded(p_queue_id, 'accept', p_actor);
        outcome := 'accepted';
        accepted_at := r.accepted_at;
    ELSIF EXISTS (SELECT 1 FROM ai_marking_results m WHERE m.queue_id = p_queue_id)
          OR EXISTS (SELECT 1 FROM ai_marking_queue q WHERE q.queue_id = p_queue_id) THEN
        outcome := 'not_completed';
    ELSE
        outcome := 'not_found';
    END IF;
    RETURN NEXT;
END
$$;

-- The run a review of "the assignment" means: its newest queue row's run, or
-- (queue rows pruned) its newest result's.
CREATE OR REPLACE FUNCTION aiqueue_latest_run(p_assignment_id text) RETURNS uuid
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT q.run_id FROM ai_marking_queue q WHERE q.assignment_id = p_assignment_id
         ORDER BY q.created_at DESC, q.seq DESC LIMIT 1),
        (SELECT m.run_id FROM ai_marking_results m WHERE m.assignment_id = p_assignment_id
         ORDER BY m.seq DESC LIMIT 1))
$$;

-- Accept or revert every unreviewed result of the assignment's latest run, in
-- one transaction.  Submission order keeps two concurrent run reverts from
-- locking the same submissions in opposite orders.
CREATE OR REPLACE FUNCTION aiqueue_review_run(p_assignment_id text, p_action text,
                                              p_actor text)
RETURNS TABLE (done integer, superseded integer) LANGUAGE plpgsql AS $$
DECLARE
    q uuid;
    o text;
BEGIN
    done := 0;
    superseded := 0;
    FOR q IN SELECT m.queue_id FROM ai_marking_results m
             WHERE m.run_id = aiqueue_latest_run(p_assignment_id)
               AND m.assignment_id = p_assignment_id AND m.review = 'unreviewed'
             ORDER BY m.submission_id, m.seq DESC LOOP
        IF p_action = 'accept' THEN
            SELECT a.outcome INTO o FROM aiqueue_accept(q, p_actor, NULL) a;
        ELSE
            SELECT r.outcome INTO o FROM aiqueue_revert(q, p_actor) r;
        END IF;
        IF o IN ('accepted', 'reverted') THEN
            done := done + 1;
        ELSIF o = 'superseded' THEN
            superseded := superseded + 1;
        END IF;
    END LOOP;
    RETURN NEXT;
END
$$;
