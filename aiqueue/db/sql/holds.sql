-- Review holds and the teacher's answers (docs/review-holds.md; queue/holds.py,
-- queue/clarify.py; the hold itself is written by 86_holds.sql).

-- review_needed --
-- An assignment's ($1) held results still waiting for a teacher: unreviewed,
-- the submission's newest applied result (a later mark replaced none of it),
-- and not asking a question already answered (its row is being marked again).
-- The question is read from the result it came with (content: for the
-- teacher's list only).  Oldest first, at most $2.
SELECT h.queue_id, h.submission_id, h.reason, h.question_id, h.held_at,
       m.result -> 'review' ->> 'question' AS question,
       CASE WHEN jsonb_typeof(m.result -> 'review' -> 'best_guess') = 'number'
            THEN (m.result -> 'review' ->> 'best_guess')::float8 END AS best_guess,
       CASE WHEN jsonb_typeof(m.result -> 'max_score') = 'number'
            THEN (m.result ->> 'max_score')::float8 END AS max_score,
       encode(p.sha256, 'hex') AS payload_version
FROM ai_marking_holds h
JOIN ai_marking_results m ON m.queue_id = h.queue_id
LEFT JOIN ai_marking_payloads p ON p.id = h.payload_id
WHERE h.assignment_id = $1 AND m.review = 'unreviewed' AND m.applied
  AND NOT EXISTS (SELECT 1 FROM ai_marking_results l
                  WHERE l.submission_id = m.submission_id AND l.seq > m.seq
                    AND l.review <> 'reverted' AND l.applied)
  AND NOT EXISTS (SELECT 1 FROM ai_marking_answers a WHERE a.question_id = h.question_id)
ORDER BY h.held_at, h.queue_id
LIMIT $2;

-- asked_question --
-- A question ($2) of assignment $1, as its asking rows hold it: its words, the
-- payload it was asked under (none: '{}'), whether it was answered, and the
-- submissions whose newest result asked it (the rows to mark again).  Its
-- words as the teacher's list shows them: the first asker's.
SELECT (SELECT m.result -> 'review' ->> 'question'
        FROM ai_marking_holds h JOIN ai_marking_results m ON m.queue_id = h.queue_id
        WHERE h.question_id = $2 AND h.assignment_id = $1
        ORDER BY h.held_at, h.queue_id LIMIT 1) AS question,
       (SELECT coalesce(p.payload, '{}'::jsonb)::text
        FROM ai_marking_holds h LEFT JOIN ai_marking_payloads p ON p.id = h.payload_id
        WHERE h.question_id = $2 AND h.assignment_id = $1 LIMIT 1) AS payload,
       EXISTS (SELECT 1 FROM ai_marking_answers a WHERE a.question_id = $2) AS answered,
       ARRAY(SELECT DISTINCT h.submission_id
             FROM ai_marking_holds h JOIN ai_marking_results m ON m.queue_id = h.queue_id
             WHERE h.question_id = $2 AND h.assignment_id = $1 AND m.review = 'unreviewed'
               AND m.applied
               AND NOT EXISTS (SELECT 1 FROM ai_marking_results l
                               WHERE l.submission_id = m.submission_id AND l.seq > m.seq
                                 AND l.review <> 'reverted' AND l.applied)
             ORDER BY 1) AS askers;

-- answer_question --
-- The teacher's answer ($1 question, $2 assignment), once: no row back when
-- it was answered already.  $3: the sha256 of the rubric the notes belong to
-- (the payload without its notes, queue/holds.py), $4: the note, $5 actor.
-- In the same transaction (db/holds.py: then the re-mark of the askers), the
-- assignment's rows not yet dispatched go under the new payload $6, keeping
-- their place and whatever they wait for: $6 is stored as a payload whose
-- window of use covers their enqueue times (the prune reads it: migration
-- 0014).  A row whose submission has another live row stays as it is (one
-- live row per submission and payload, migration 0036).
WITH answer AS (
    INSERT INTO ai_marking_answers (question_id, assignment_id, base_sha256, note, actor)
    VALUES ($1, $2, $3, $4::jsonb, $5)
    ON CONFLICT (question_id) DO NOTHING
    RETURNING answered_at
),
waiting AS MATERIALIZED (
    SELECT q.queue_id, q.created_at FROM ai_marking_queue q, answer
    WHERE q.assignment_id = $2 AND q.status = 'pending'
      AND NOT EXISTS (SELECT 1 FROM ai_marking_queue o
                      WHERE o.submission_id = q.submission_id AND o.queue_id <> q.queue_id
                        AND o.phase = 'live')
    FOR UPDATE OF q
),
payload AS (
    INSERT INTO ai_marking_payloads AS p (sha256, payload, first_used_at, last_used_at)
    SELECT sha256(convert_to($6::jsonb::text, 'UTF8')), $6::jsonb,
           least(now(), (SELECT min(w.created_at) FROM waiting w)),
           greatest(now(), (SELECT max(w.created_at) FROM waiting w))
    FROM answer
    ON CONFLICT (sha256) DO UPDATE
    SET first_used_at = least(p.first_used_at, excluded.first_used_at),
        last_used_at = greatest(p.last_used_at, excluded.last_used_at)
    RETURNING p.id, p.sha256
),
moved AS (
    UPDATE ai_marking_queue q SET payload_id = payload.id, updated_at = now()
    FROM waiting w, payload
    WHERE q.queue_id = w.queue_id
    RETURNING 1
)
SELECT answer.answered_at, encode(payload.sha256, 'hex') AS payload_version,
       (SELECT count(*) FROM moved) AS moved
FROM answer, payload;

-- rubric_notes --
-- Every teacher's answer given under a rubric (its sha256 without notes, $1):
-- the notes an enqueue of that rubric gets, so the next class is not asked again.
SELECT a.note::text AS note FROM ai_marking_answers a
WHERE a.base_sha256 = $1
ORDER BY a.answered_at, a.question_id;
