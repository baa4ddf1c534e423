-- A school's data: retention, erasure, export, replay by filter.
-- The rules that call these: aiqueue/records/.  Gateway: aiqueue/db/records.py.

-- retain --
-- Retention, in bounded batches (at most $3 rows of each kind per call), at most
-- once per $4 seconds across every instance (the control row is the gate, as
-- for the prune).  Three kinds, each past its own period:
--   * ended rows (failed, cancelled, expired) finished more than $1 s ago; their
--     attempt history goes with them (deleted here: no foreign key cascades into
--     the month partitions, functions/97_partitions.sql);
--   * applied results older than $2 s (the review record, marks, usage);
--   * attempt history older than $2 s of rows still kept (a row older than the
--     history period that has not ended yet).
-- A DELETE fires no status trigger: pruning writes no live event and no
-- marking.run_finished / row_failed notification (functions/90_outbox.sql); the count
-- deltas (statement trigger) keep the stats exact.  'expired' is named here by
-- status only: the state arrives with docs/operating/alerts.md.  Every path that ends a row
-- sets finished_at, which ai_marking_queue_finished_idx (status, finished_at) reads.
WITH gate AS (
    UPDATE ai_queue_control SET last_retain_at = now()
    WHERE id = 1 AND last_retain_at < now() - make_interval(secs => $4::float8)
    RETURNING 1
),
ended AS (
    DELETE FROM ai_marking_queue
    WHERE queue_id IN (
        SELECT queue_id FROM ai_marking_queue
        WHERE status IN ('failed', 'cancelled', 'expired')
          AND finished_at < now() - make_interval(secs => $1::float8)
          -- never a row that still holds a dispatch slot
          AND NOT EXISTS (SELECT 1 FROM ai_marking_claimed c
                          WHERE c.queue_id = ai_marking_queue.queue_id)
          AND EXISTS (SELECT 1 FROM gate)
        LIMIT $3::integer)
    RETURNING queue_id, created_at
),
results AS (
    DELETE FROM ai_marking_results
    WHERE queue_id IN (
        SELECT queue_id FROM ai_marking_results
        WHERE applied_at < now() - make_interval(secs => $2::float8)
          AND EXISTS (SELECT 1 FROM gate)
        LIMIT $3::integer)
    RETURNING queue_id
),
-- A held result's hold goes with it (no key cascades from the results' months).
results_held AS (
    DELETE FROM ai_marking_holds h WHERE h.queue_id IN (SELECT queue_id FROM results)
),
ended_attempts AS (
    DELETE FROM ai_marking_attempts a USING ended e
    WHERE a.queue_id = e.queue_id AND a.started_at >= aiqueue_months_from(e.created_at)
    RETURNING 1
),
-- Not the attempts of rows this statement deletes (ended_attempts takes them:
-- one statement must not delete a row twice).  Whole months past the period
-- are dropped as partitions (aiqueue_keep_partitions); this reaches the month
-- at the boundary.
attempts AS (
    DELETE FROM ai_marking_attempts
    WHERE id IN (
        SELECT a.id FROM ai_marking_attempts a
        WHERE a.started_at < now() - make_interval(secs => $2::float8)
          AND EXISTS (SELECT 1 FROM gate)
          AND NOT EXISTS (SELECT 1 FROM ended e WHERE e.queue_id = a.queue_id)
        LIMIT $3::integer)
    RETURNING 1
)
SELECT (SELECT count(*) FROM gate) AS ran,
       (SELECT count(*) FROM ended) AS ended,
       (SELECT count(*) FROM results) AS results,
       (SELECT count(*) FROM attempts) + (SELECT count(*) FROM ended_attempts) AS attempts;

-- keep_partitions --
-- The month partitions: this month's and next month's created ahead, and each
-- month past its keep period detached and dropped whole (functions/97_partitions.sql).
-- $1: the history period (attempts, results) in seconds; $2: at most once per
-- $2 seconds across every instance.
SELECT created, dropped FROM aiqueue_keep_partitions($1::float8, $2::float8);

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
-- those of results whose rows are gone.
attempts AS (
    DELETE FROM ai_marking_attempts a WHERE a.queue_id IN (SELECT queue_id FROM ids) RETURNING 1
),
queue AS (
    DELETE FROM ai_marking_queue q USING rows r WHERE q.queue_id = r.queue_id RETURNING 1
),
-- Another row's dispatch line that handed one of these rows out next (a settle's
-- handoff, migration 0017) forgets it: the row is gone, there is nothing to hand back.
-- That line started before the settle that claimed one of these rows, and no
-- dispatch is in flight for a day (its lease ends first): only those days of
-- attempts are read (no index names next_queue_id; the settle writes it).  A
-- longer one would keep a link to a row that is gone, which hands back nothing.
handoff_window AS MATERIALIZED (
    SELECT min(x.started_at) - interval '1 day' AS lo, max(x.started_at) AS hi
    FROM ai_marking_attempts x WHERE x.queue_id IN (SELECT queue_id FROM rows)
),
handoffs AS (
    UPDATE ai_marking_attempts a SET next_queue_id = NULL, next_seq = NULL
    FROM handoff_window w
    WHERE a.started_at >= w.lo AND a.started_at <= w.hi
      AND a.next_queue_id IN (SELECT queue_id FROM rows)
      AND a.queue_id NOT IN (SELECT queue_id FROM ids)
),
results AS (
    DELETE FROM ai_marking_results m WHERE m.submission_id = ANY ($1::uuid[]) RETURNING 1
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
single_events AS (
    DELETE FROM ai_marking_events e WHERE e.submission_id = ANY ($1::uuid[]) RETURNING 1
),
-- An enqueue's batch event (migration 0009) keeps the entries of the other
-- submissions, its two arrays still aligned.  (A live reader inside that batch
-- may skip one entry: its cursor counts positions.  Live events are a hint for
-- pages, not a record.)
batches AS MATERIALIZED (
    SELECT e.id,
           array_agg(u.q ORDER BY u.k) FILTER (WHERE u.s <> ALL ($1::uuid[])) AS queue_ids,
           array_agg(u.s ORDER BY u.k) FILTER (WHERE u.s <> ALL ($1::uuid[])) AS submission_ids,
           count(*) FILTER (WHERE u.s = ANY ($1::uuid[])) AS removed
    FROM ai_marking_events e,
         unnest(e.queue_ids, e.submission_ids) WITH ORDINALITY AS u (q, s, k)
    WHERE e.submission_ids && $1::uuid[]
    GROUP BY e.id
),
batch_cut AS (
    UPDATE ai_marking_events e SET queue_ids = b.queue_ids, submission_ids = b.submission_ids
    FROM batches b WHERE e.id = b.id AND b.queue_ids IS NOT NULL
    RETURNING 1
),
batch_gone AS (
    DELETE FROM ai_marking_events e USING batches b
    WHERE e.id = b.id AND b.queue_ids IS NULL
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

-- export_attempts --
-- One page of the attempt history started in [$1, $2), after attempt id $3,
-- $4 at most, in id order.  Keyset pages: each is one short read on the
-- bounded pool, so a long export never holds a connection or a snapshot open.
-- Content-free: ids, times, outcomes, error codes, the usage's model, tokens
-- and cost (never the usage object itself, nor any text of the function).
SELECT a.id, a.queue_id, q.submission_id, q.assignment_id,
       coalesce(q.group_key, q.assignment_id) AS group_key, a.kind, a.attempt,
       a.started_at, a.ended_at, a.outcome, a.error, a.actor,
       a.usage ->> 'model' AS model,
       aiqueue_usage_int(a.usage -> 'prompt_tokens') AS prompt_tokens,
       aiqueue_usage_int(a.usage -> 'completion_tokens') AS completion_tokens,
       CASE WHEN jsonb_typeof(a.usage -> 'cost_usd') = 'number'
            THEN (a.usage ->> 'cost_usd')::numeric END AS cost_usd
FROM ai_marking_attempts a JOIN ai_marking_queue q ON q.queue_id = a.queue_id
WHERE a.started_at >= $1::timestamptz AND a.started_at < $2::timestamptz
  AND a.id > $3::bigint
ORDER BY a.id
LIMIT $4::integer;

-- export_results --
-- One page of the results applied in [$1, $2), after seq $3, $4 at most.
-- Marks only as numbers; the AI's feedback only when $5 (include=feedback).  With
-- each, its audit record: the payload version, the function's version, the
-- model and provider, who reviewed it and when (docs/remark.md).
SELECT m.seq, m.queue_id, m.submission_id, m.assignment_id,
       coalesce(m."group", m.assignment_id) AS group_key, m.applied_at, m.review,
       m.accepted_at, m.reverted_at, m.actor, m.model, m.prompt_tokens, m.completion_tokens,
       m.cost_usd, m.processing_seconds, m.applied, m.payload_version, m.function_version,
       m.provider, coalesce(m.reverted_at, m.accepted_at) AS reviewed_at,
       CASE WHEN jsonb_typeof(m.result -> 'score') = 'number'
            THEN (m.result ->> 'score')::numeric END AS score,
       CASE WHEN jsonb_typeof(m.result -> 'max_score') = 'number'
            THEN (m.result ->> 'max_score')::numeric END AS max_score,
       CASE WHEN jsonb_typeof(m.adjusted_result -> 'score') = 'number'
            THEN (m.adjusted_result ->> 'score')::numeric END AS adjusted_score,
       CASE WHEN $5::boolean AND jsonb_typeof(m.result -> 'feedback') = 'string'
            THEN m.result ->> 'feedback' END AS feedback
FROM ai_marking_results m
WHERE m.applied_at >= $1::timestamptz AND m.applied_at < $2::timestamptz
  AND m.seq > $3::bigint
ORDER BY m.seq
LIMIT $4::integer;

-- replay --
-- Replay by filter (docs/operating/data-protection.md), one set-based statement.  $1 assignment,
-- $2 group, $3 kind, $4 error code, $5/$6 failed in [after, before), each
-- NULL = any; $7 dry run; $8 actor.  `matched`: failed rows that match;
-- `eligible`: those a replay moves, the newest failed row of each submission
-- that has no live row (as the retry-all always did); `replayed`: moved now,
-- through aiqueue_retry (functions/95_recovery.sql), so each gets fresh attempts and a
-- fresh turn as an enqueue hands them out, and the claim paces them under
-- every limit as usual.  Only rows still `failed` move: aiqueue_retry locks
-- and re-checks each, and a completed row never matches.  A dry run hands it
-- no row and writes nothing.
WITH matched AS MATERIALIZED (
    SELECT q.queue_id, q.submission_id, q.created_at, q.seq
    FROM ai_marking_queue q
    WHERE q.status = 'failed'
      AND ($1::text IS NULL OR q.assignment_id = $1)
      AND ($2::text IS NULL OR coalesce(q.group_key, q.assignment_id) = $2)
      AND ($3::text IS NULL OR q.kind = $3)
      AND ($4::text IS NULL OR q.last_error = $4)
      AND ($5::timestamptz IS NULL OR q.finished_at >= $5)
      AND ($6::timestamptz IS NULL OR q.finished_at < $6)
),
eligible AS MATERIALIZED (
    SELECT m.queue_id, m.seq FROM matched m
    WHERE NOT EXISTS (SELECT 1 FROM ai_marking_queue o
                      WHERE o.submission_id = m.submission_id
                        AND o.status IN ('pending', 'processing'))
      AND NOT EXISTS (SELECT 1 FROM ai_marking_queue l
                      WHERE l.submission_id = m.submission_id AND l.status = 'failed'
                        AND (l.created_at, l.seq) > (m.created_at, m.seq))
)
SELECT (SELECT count(*) FROM matched) AS matched,
       (SELECT count(*) FROM eligible) AS eligible,
       (SELECT count(*) FROM aiqueue_retry(
            CASE WHEN $7::boolean THEN ARRAY[]::uuid[]
                 ELSE ARRAY(SELECT e.queue_id FROM eligible e ORDER BY e.seq) END,
            $8::text)) AS replayed;
