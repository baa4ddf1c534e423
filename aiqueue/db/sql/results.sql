-- The teacher's results page and the demo data (aiqueue/reads/teacher.py, aiqueue/dev/demo.py).

-- assignment_info --
SELECT assignment_id, title, payload::text AS payload
FROM ai_marking_assignments WHERE assignment_id = $1;

-- submission_results --
-- The teacher's table: every submission of the assignment (or the one $3 names)
-- with its AI result, the status (and last progress item) of its latest queue
-- row, and the review of the newest result still applied (none reverted after
-- it: that is the one the mark shows).  student_name is read through to_jsonb
-- so a host's submissions table without that column works.  same_answers: how
-- many other submissions of the assignment had their latest row keyed with the
-- same answer (aiqueue 0028), so marked once.  A row not marked yet also says why
-- it waits and until when (the page's words: web/waits.py): its attempts, its
-- last error and when it is due again, a spend cap's pause, its not_before, the
-- leader whose mark it copies, its lane, and its pool's breaker and hold.
-- A re-mark (docs/remark.md): the mark it replaced (`previous_result`) when the
-- mark before was made under another payload, and whether the mark shown was
-- made under another payload than the assignment's saved one (`older_rubric`).
SELECT s.id, to_jsonb(s) ->> 'student_name' AS student_name, s.content,
       s.ai_result::text AS ai_result, s.ai_marked_at, q.status AS queue_status,
       CASE WHEN q.status = 'processing' THEN q.progress::text END AS progress,
       m.queue_id AS result_queue_id, m.review, m.adjusted_result::text AS adjusted_result,
       CASE WHEN q.answer_key IS NOT NULL
            THEN count(*) OVER (PARTITION BY q.answer_key) - 1 ELSE 0 END AS same_answers,
       -- Held for its run's calibration (docs/agreement.md).
       coalesce(q.status = 'pending' AND q.held, false) AS held,
       q.attempts, q.kind, q.last_error, q.run_after, q.not_before, q.lane, q.deadline,
       q.copies_leader,
       aiqueue_spend_resumes_at(q.status, q.pool, q.priority, q.group_key) AS resumes_at,
       ctl.circuit_open_until AS breaker_until, ctl.busy_until,
       CASE WHEN p.payload_version IS DISTINCT FROM m.payload_version
            THEN m.previous_result::text END AS previous_result,
       m.queue_id IS NOT NULL AND a.payload IS NOT NULL
           AND m.payload_version IS DISTINCT FROM
               CASE WHEN a.payload <> '{}'::jsonb
                    THEN encode(sha256(convert_to(a.payload::text, 'UTF8')), 'hex') END
           AS older_rubric
FROM submissions s
LEFT JOIN LATERAL (
    SELECT status, progress, answer_key, held_run_after IS NOT NULL AS held, attempts, kind,
           pool, priority, coalesce(group_key, assignment_id) AS group_key, last_error,
           run_after, not_before, lane, deadline, leader_id IS NOT NULL AS copies_leader
    FROM ai_marking_queue
    WHERE submission_id = s.id
    ORDER BY created_at DESC, seq DESC
    LIMIT 1
) q ON true
-- Only a waiting row reads its pool's control row (none: the pool has no state).
LEFT JOIN LATERAL (
    SELECT c.circuit_open_until, c.busy_until FROM ai_queue_control c
    WHERE c.pool = q.pool AND q.status = 'pending'
) ctl ON true
LEFT JOIN LATERAL (
    SELECT queue_id, review, adjusted_result, seq, payload_version, previous_result
    FROM ai_marking_results
    WHERE submission_id = s.id AND review <> 'reverted' AND applied
    ORDER BY seq DESC
    LIMIT 1
) m ON true
LEFT JOIN LATERAL (
    SELECT payload_version FROM ai_marking_results
    WHERE submission_id = s.id AND seq < m.seq AND applied
    ORDER BY seq DESC
    LIMIT 1
) p ON true
LEFT JOIN ai_marking_assignments a ON a.assignment_id = s.assignment_id
WHERE s.assignment_id = $1 AND ($3::uuid IS NULL OR s.id = $3)
ORDER BY 2 NULLS LAST, s.id
LIMIT $2;

-- unmarked_submissions --
-- "Mark All" marks what has no AI mark yet, in the table's order.
SELECT s.id
FROM submissions s
WHERE s.assignment_id = $1 AND s.ai_result IS NULL
ORDER BY to_jsonb(s) ->> 'student_name' NULLS LAST, s.id
LIMIT $2;

-- save_assignment --
INSERT INTO ai_marking_assignments (assignment_id, title, payload)
VALUES ($1, $2, $3::jsonb)
ON CONFLICT (assignment_id) DO UPDATE
SET title = excluded.title, payload = excluded.payload, updated_at = now()
WHERE (ai_marking_assignments.title, ai_marking_assignments.payload)
      IS DISTINCT FROM (excluded.title, excluded.payload);

-- seed_submissions --
-- Demo submissions with fixed ids; ones already there are left alone, so seeding
-- twice changes nothing.  jsonb_populate_recordset fills only the columns the
-- submissions table has (a host's table may lack student_name).
INSERT INTO submissions
SELECT * FROM jsonb_populate_recordset(NULL::submissions, $1::jsonb)
ON CONFLICT (id) DO NOTHING
RETURNING id;
