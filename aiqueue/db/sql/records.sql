-- A school's data: retention, the export, replay by filter (erasure: erasure.sql).
-- The rules that call these: aiqueue/records/.  Gateway: aiqueue/db/records.py.

-- retain_due --
-- Whether retention's gate is open, read before it (as the prune's: sql/queue.sql prune_due).
SELECT last_retain_at < now() - make_interval(secs => $1::float8) AS due
FROM ai_queue_control WHERE id = 1

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
-- A DELETE is no move: pruning writes no live event and no
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
-- $2 seconds across every instance; $3 and $4: the record's periods of
-- completed and of failed, cancelled and expired rows (NULL: its months stay).
SELECT created, dropped
FROM aiqueue_keep_partitions($1::float8, $2::float8, p_completed_seconds => $3::float8,
                             p_ended_seconds => $4::float8);

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
    WHERE q.phase = 'failed'
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
                        AND o.phase = 'live')
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
