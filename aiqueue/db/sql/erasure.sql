-- Erasure of one student's data: everything the queue holds that names a
-- submission, in every month (docs/operating/data-protection.md).
-- The rule that calls these: aiqueue/records/erasure.py.  Gateway: aiqueue/db/erasure.py.

-- erase_lock_rows --
-- An erasure's first step: lock the submissions' queue rows, in the order
-- aiqueue_complete locks (the queue row, then the submission).  A webhook
-- applying a result to one of them right now finishes first; every statement
-- after this one sees what it committed, and a later callback finds no row.
SELECT q.queue_id FROM ai_marking_queue q
WHERE q.submission_id = ANY ($1::uuid[])
ORDER BY q.queue_id
FOR UPDATE;

-- erase_lock_submissions --
-- Then the submissions (a revert locks the submission before its result, so
-- an erasure and a revert of the same submission queue up instead of deadlocking).
SELECT s.id FROM submissions s
WHERE s.id = ANY ($1::uuid[])
ORDER BY s.id
FOR UPDATE;

-- erase_generic_plan --
-- For the statements after it, in the same transaction (an erasure's): their
-- plans do not depend on the ids, and `erase` reaches three tables' months, so
-- planning it for each call cost more than running it (10,000,000 rows,
-- docs/performance.md).  With prepared statements kept, each is planned once
-- per connection.  SET LOCAL ends with the transaction.
SET LOCAL plan_cache_mode = force_generic_plan;

-- erase --
-- Everything the queue holds that names submissions $1, in one statement after
-- the locks above: their queue rows (a row in flight too: deleting it is its
-- cancellation, and its late callback then finds nothing to apply), attempt
-- history (with the rows), results and review, live events (a batch event
-- loses only their entries), notifications, budget entries, payloads nothing
-- else uses; their marks on `submissions` are cleared.  One content-free record
-- is kept: the sha256 of each id and the counts ($2: 'api' or 'cli').
-- records/erasure.py lists every queue table and how it is covered;
-- tests/integration/test_erasure.py holds that list against the catalog.
WITH subs AS (
    SELECT DISTINCT u.id FROM unnest($1::uuid[]) AS u (id)
),
rows AS MATERIALIZED (
    SELECT q.queue_id, q.payload_id, q.created_at FROM ai_marking_queue q
    WHERE q.submission_id = ANY ($1::uuid[])
),
-- Every queue id the submissions had that anything may still name: their rows'
-- and their results' (results outlive their rows).
ids AS MATERIALIZED (
    SELECT r.queue_id FROM rows r
    UNION
    SELECT m.queue_id FROM ai_marking_results m WHERE m.submission_id = ANY ($1::uuid[])
),
-- Every partition's (the queue_id index of each month); with the rows' ids,
-- those of results whose rows are gone.  What the handoffs below need of them
-- comes back from the delete.
attempts AS (
    DELETE FROM ai_marking_attempts a WHERE a.queue_id IN (SELECT queue_id FROM ids)
    RETURNING a.queue_id, a.started_at, a.taken_by, a.handed_by, a.next_queue_id
),
queue AS (
    DELETE FROM ai_marking_queue q USING rows r WHERE q.queue_id = r.queue_id RETURNING 1
),
-- Another row's dispatch line that handed one of these rows out next (a settle's
-- handoff, migration 0017) forgets it: the row is gone, there is nothing to hand back.
-- So does the line of a row one of these handed out (its handed_by, migration 0076).
-- Both ends are on these rows' own lines (handed_by, next_queue_id), so the other
-- rows' lines are read by their queue id.  No index names next_queue_id (the
-- settle writes it, and stays a heap-only update).  Both updates below set the
-- same: a line either reaches is left right whichever one writes it.
links AS (
    UPDATE ai_marking_attempts a
    SET next_queue_id = CASE WHEN a.next_queue_id IN (SELECT queue_id FROM ids)
                             THEN NULL ELSE a.next_queue_id END,
        next_seq = CASE WHEN a.next_queue_id IN (SELECT queue_id FROM ids)
                        THEN NULL ELSE a.next_seq END,
        handed_by = CASE WHEN a.handed_by IN (SELECT queue_id FROM ids)
                         THEN NULL ELSE a.handed_by END
    WHERE a.queue_id = ANY (ARRAY(SELECT d.handed_by FROM attempts d
                                  UNION SELECT d.next_queue_id FROM attempts d))
      AND (a.next_queue_id IN (SELECT queue_id FROM ids)
           OR a.handed_by IN (SELECT queue_id FROM ids))
      AND a.queue_id NOT IN (SELECT queue_id FROM ids)
),
-- A line a settle claimed before migration 0076 (taken by its caller, naming no
-- handing row), or a repeated result's (which links nothing): its handing line
-- started before that claim, and no dispatch is in flight for a day (its lease
-- ends first), so that day of attempts is read.  A line claimed outside a
-- settle was handed out by none.  (A link that escapes this, from before
-- settles named their caller, names a row that is gone and hands back nothing.)
handoff_window AS MATERIALIZED (
    SELECT min(d.started_at) - interval '1 day' AS lo, max(d.started_at) AS hi
    FROM attempts d
    WHERE d.taken_by IS NOT NULL AND d.handed_by IS NULL
      AND d.queue_id IN (SELECT queue_id FROM rows)
),
links_unnamed AS (
    UPDATE ai_marking_attempts a
    SET next_queue_id = NULL, next_seq = NULL,
        handed_by = CASE WHEN a.handed_by IN (SELECT queue_id FROM ids)
                         THEN NULL ELSE a.handed_by END
    FROM handoff_window w
    WHERE a.started_at >= w.lo AND a.started_at <= w.hi
      AND a.next_queue_id IN (SELECT queue_id FROM rows)
      AND a.queue_id NOT IN (SELECT queue_id FROM ids)
),
results AS (
    DELETE FROM ai_marking_results m WHERE m.submission_id = ANY ($1::uuid[])
    RETURNING m.applied_at
),
-- The hours those results were summed in (the cost card's, 96_usage_hours.sql)
-- are summed again from what remains, by the next housekeeping pass.
usage_hours AS (
    DELETE FROM ai_marking_usage_hours u
    WHERE u.hour IN (SELECT date_bin('1 hour', r.applied_at, TIMESTAMPTZ 'epoch') FROM results r)
),
held AS (
    -- deleted with their results (no key cascades from the results' months), the
    -- question with the result
    DELETE FROM ai_marking_holds h WHERE h.submission_id = ANY ($1::uuid[]) RETURNING 1
),
-- A teacher's answer to a question only these submissions asked (its note
-- quotes the question): the rubric's notes forget it.
answers AS (
    DELETE FROM ai_marking_answers a
    WHERE a.question_id IN (SELECT h.question_id FROM ai_marking_holds h
                            WHERE h.submission_id = ANY ($1::uuid[]))
      AND NOT EXISTS (SELECT 1 FROM ai_marking_holds o
                      WHERE o.question_id = a.question_id
                        AND o.submission_id <> ALL ($1::uuid[]))
    RETURNING 1
),
budget AS (
    DELETE FROM ai_marking_budget b WHERE b.queue_id IN (SELECT queue_id FROM ids) RETURNING 1
),
outbox AS (
    DELETE FROM ai_marking_outbox o
    WHERE o.queue_id IN (SELECT queue_id FROM ids)
       OR o.body ->> 'submission_id' IN (SELECT s.id::text FROM subs s)
    RETURNING 1
),
-- The live events that name them, read once: a row's own event (deleted), and
-- an enqueue's batch event (migration 0009), which keeps the entries of the
-- other submissions, its two arrays still aligned.  (A live reader inside that
-- batch may skip one entry: its cursor counts positions.  Live events are a
-- hint for pages, not a record.)  The writes below reach them by their ids
-- (each month's primary key), whatever plan the statement keeps.
events AS MATERIALIZED (
    SELECT e.id, e.submission_id, e.queue_ids, e.submission_ids
    FROM ai_marking_events e
    WHERE e.submission_id = ANY ($1::uuid[]) OR e.submission_ids && $1::uuid[]
),
single_events AS (
    DELETE FROM ai_marking_events e
    WHERE e.id = ANY (ARRAY(SELECT x.id FROM events x WHERE x.submission_id IS NOT NULL))
    RETURNING 1
),
batches AS MATERIALIZED (
    SELECT x.id,
           array_agg(u.q ORDER BY u.k) FILTER (WHERE u.s <> ALL ($1::uuid[])) AS queue_ids,
           array_agg(u.s ORDER BY u.k) FILTER (WHERE u.s <> ALL ($1::uuid[])) AS submission_ids,
           count(*) FILTER (WHERE u.s = ANY ($1::uuid[])) AS removed
    FROM events x,
         unnest(x.queue_ids, x.submission_ids) WITH ORDINALITY AS u (q, s, k)
    WHERE x.submission_ids IS NOT NULL
    GROUP BY x.id
),
batch_cut AS (
    UPDATE ai_marking_events e SET queue_ids = b.queue_ids, submission_ids = b.submission_ids
    FROM batches b
    WHERE e.id = ANY (ARRAY(SELECT c.id FROM batches c WHERE c.queue_ids IS NOT NULL))
      AND b.id = e.id
    RETURNING 1
),
batch_gone AS (
    DELETE FROM ai_marking_events e
    WHERE e.id = ANY (ARRAY(SELECT b.id FROM batches b WHERE b.queue_ids IS NULL))
    RETURNING 1
),
-- A payload only these rows named.  Its rows were all created within its
-- window of use (migration 0014); one that an enqueue reused after these rows
-- (its upsert moved last_used_at, under the row lock this delete then waits
-- for) is kept, as is one another submission's row still names.
payloads AS (
    DELETE FROM ai_marking_payloads p
    USING (SELECT r.payload_id, max(r.created_at) AS newest FROM rows r
           WHERE r.payload_id IS NOT NULL GROUP BY r.payload_id) u
    WHERE p.id = u.payload_id AND p.last_used_at <= u.newest
      AND NOT aiqueue_payload_named(p.id, p.first_used_at, p.last_used_at, $1::uuid[])
    RETURNING 1
),
-- Drift canaries' rows that re-marked these submissions (their runs keep only figures).
canary AS (
    DELETE FROM ai_marking_canary_rows c WHERE c.submission_id = ANY ($1::uuid[]) RETURNING 1
),
marks AS (
    UPDATE submissions s SET ai_result = NULL, ai_marked_at = NULL
    WHERE s.id = ANY ($1::uuid[]) AND (s.ai_result IS NOT NULL OR s.ai_marked_at IS NOT NULL)
    RETURNING 1
),
counts AS (
    SELECT jsonb_build_object(
        'ai_marking_queue', (SELECT count(*) FROM queue),
        'ai_marking_attempts', (SELECT count(*) FROM attempts),
        'ai_marking_results', (SELECT count(*) FROM results),
        'ai_marking_holds', (SELECT count(*) FROM held),
        'ai_marking_answers', (SELECT count(*) FROM answers),
        'ai_marking_events', (SELECT count(*) FROM single_events)
                             + (SELECT coalesce(sum(removed), 0) FROM batches),
        'ai_marking_outbox', (SELECT count(*) FROM outbox),
        'ai_marking_budget', (SELECT count(*) FROM budget),
        'ai_marking_payloads', (SELECT count(*) FROM payloads),
        'ai_marking_canary_rows', (SELECT count(*) FROM canary),
        'submissions', (SELECT count(*) FROM marks)) AS erased
),
record AS (
    INSERT INTO ai_marking_erasures (subjects, via, counts)
    SELECT ARRAY(SELECT encode(sha256(convert_to(s.id::text, 'UTF8')), 'hex') FROM subs s
                 ORDER BY 1),
           $2::text, c.erased
    FROM counts c
)
SELECT c.erased::text AS erased, (SELECT count(*) FROM batch_cut) + (SELECT count(*) FROM batch_gone)
       AS batches
FROM counts c;

-- assignment_subjects --
-- The submissions an erasure of assignment $1 covers: the host's, and any the
-- queue still names under that assignment.
SELECT s.id FROM submissions s WHERE s.assignment_id = $1
UNION
SELECT q.submission_id FROM ai_marking_queue q WHERE q.assignment_id = $1
UNION
SELECT m.submission_id FROM ai_marking_results m WHERE m.assignment_id = $1;
