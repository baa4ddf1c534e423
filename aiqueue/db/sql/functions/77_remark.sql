-- A rubric changes: re-mark what it changed (docs/remark.md).  The rules the
-- settle and the run's end call; the re-mark itself is remark.sql (its queries)
-- and aiqueue/queue/remark.py.
--
--   aiqueue_payload_version   a payload's version: the hex of its stored sha256
--   aiqueue_result_applies    aiqueue_complete (70_settle) applies a result only when
--                             no newer row's result under another payload is applied
--   aiqueue_remark_finished   what marking.run_finished adds for a re-mark's run
--                             (90_outbox): "remark": true and "changed"

-- The version of payload `p_id` (NULL: the empty payload, which is stored as none).
-- plpgsql, as the settle's other helpers: a SQL function with a FROM is never inlined,
-- and would be planned again on every call.
CREATE OR REPLACE FUNCTION aiqueue_payload_version(p_id bigint) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_id IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT encode(p.sha256, 'hex') FROM ai_marking_payloads p WHERE p.id = p_id);
END
$$;

-- Whether row `p_queue_id`'s result may be applied to its submission.  Not when
-- the submission's mark came from a row enqueued after this one under another
-- payload (a re-mark's, docs/remark.md): this result, made under the older
-- rubric, is recorded (ai_marking_results.applied = false) and the newer mark
-- stays.  A row's own record never counts, so the answer is the same before and
-- after its result is written.  Results of one payload keep the rule they had:
-- a late result of an earlier attempt is still applied.
CREATE OR REPLACE FUNCTION aiqueue_result_applies(p_queue_id uuid) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    live_sub uuid := (SELECT q.submission_id FROM ai_marking_queue_live q
                      WHERE q.queue_id = p_queue_id);
BEGIN
    -- Most rows being completed are their submission's first result: one look at
    -- the results, and the record's ended months stay unopened (aiqueue 0078).
    IF live_sub IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM ai_marking_results m
                       WHERE m.submission_id = live_sub AND m.queue_id <> p_queue_id
                         AND m.applied AND m.review <> 'reverted') THEN
        RETURN true;
    END IF;
    RETURN NOT EXISTS (
        SELECT 1
        FROM ai_marking_queue q
        JOIN ai_marking_results m
          ON m.submission_id = q.submission_id AND m.queue_id <> q.queue_id
         AND m.applied AND m.review <> 'reverted'
        JOIN ai_marking_queue n ON n.queue_id = m.queue_id AND n.seq > q.seq
        WHERE q.queue_id = p_queue_id
          AND n.payload_id IS DISTINCT FROM q.payload_id);
END
$$;

-- What marking.run_finished adds when run `p_run` was a re-mark's: "remark": true
-- and "changed", the submissions whose score the run changed (the score before
-- its first applied result against the score of its last); '{}' otherwise.
CREATE OR REPLACE FUNCTION aiqueue_remark_finished(p_run uuid) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN EXISTS (SELECT 1 FROM ai_marking_remarks r WHERE r.run_id = p_run)
        THEN jsonb_build_object('remark', true, 'changed', (
            SELECT count(*) FROM (
                SELECT m.submission_id,
                       (array_agg(m.previous_result -> 'score' ORDER BY m.seq))[1] AS before,
                       (array_agg(m.result -> 'score' ORDER BY m.seq DESC))[1] AS after
                FROM ai_marking_results m
                WHERE m.run_id = p_run AND m.applied
                GROUP BY m.submission_id) s
            WHERE s.before IS DISTINCT FROM s.after))
        ELSE '{}'::jsonb END
$$;

-- The id of the stored payload equal to `doc` (NULL: the empty payload, or one
-- never stored), found by its hash as the enqueue stores it.
CREATE OR REPLACE FUNCTION aiqueue_payload_id(doc jsonb) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT p.id FROM ai_marking_payloads p
    WHERE p.sha256 = sha256(convert_to(doc::text, 'UTF8')) AND doc <> '{}'::jsonb
$$;
