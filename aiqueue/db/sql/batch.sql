-- The overnight lane (docs/overnight.md, aiqueue/batch/pack.py; migration 0020).
-- The provider is called between these statements, never inside a transaction.

-- batch_lane_rows --
-- Rows just enqueued on the batch lane (the enqueue's transaction): their
-- deadline, and run_after = when they must go live if no batch has them ($3).
-- A row that also has a not_before (docs/operating/alerts.md) is never live before it either.  A
-- follower of the same answer (72_groups.sql) keeps waiting for its leader.
UPDATE ai_marking_queue
SET lane = 'batch', deadline = $2::timestamptz,
    run_after = CASE WHEN leader_id IS NULL THEN greatest($3::timestamptz, not_before)
                     ELSE run_after END
WHERE queue_id = ANY($1::uuid[]) AND status = 'pending';

-- batch_open --
-- Record a batch and move up to $4 waiting rows into it, in one statement: the
-- record exists before the provider hears of it.  Which rows: aiqueue_batch_pick
-- (functions/75_batch.sql; only the pool's own, $1; $5 the money plan); their
-- move: aiqueue_batch_move (packing uses an attempt, as a dispatch does).
-- Nothing waiting: no batch.  batch_charge then charges the rows taken.  $6 and $7:
-- where the provider's batch API is and which variable holds its key, kept with the
-- batch so that it is still looked at if its pool stops declaring one.
WITH picked AS MATERIALIZED (
    SELECT p.id FROM aiqueue_batch_pick($1, $4, $5::jsonb) p (id)
),
batch AS (
    INSERT INTO ai_marking_batches (pool, provider, model, rows, base_url, key_env)
    SELECT $1, $2, $3, count(*), $6, $7 FROM picked HAVING count(*) > 0
    RETURNING id
)
SELECT m.*
FROM batch CROSS JOIN LATERAL aiqueue_batch_move(ARRAY(SELECT p.id FROM picked p), batch.id) m;

-- batch_add --
-- Move up to $3 more waiting rows into batch $2, still being packed, as
-- batch_open does, by the same choice (packing takes a batch's rows a chunk at a
-- time, each chunk one short transaction).  $1 the pool, $4 the money plan.
WITH batch AS (
    SELECT id FROM ai_marking_batches WHERE id = $2 AND state = 'submitting' FOR UPDATE
),
moved AS MATERIALIZED (
    SELECT m.*
    FROM batch CROSS JOIN LATERAL aiqueue_batch_move(
        ARRAY(SELECT p.id FROM aiqueue_batch_pick($1, $3, $4::jsonb) p (id)), batch.id) m
),
counted AS (
    UPDATE ai_marking_batches b SET rows = b.rows + (SELECT count(*) FROM moved)
    FROM batch WHERE b.id = batch.id
)
SELECT * FROM moved;

-- batch_charge_more --
-- The rows batch_add just took ($3), charged as batch_charge charges a batch's first.
SELECT aiqueue_batch_charge($1::bigint, $2::jsonb, $3::uuid[]);

-- batch_held --
-- The ids of the rows batch $1 still holds (an erased row is in none).
SELECT queue_id FROM ai_marking_queue WHERE batch_id = $1 AND status = 'processing';

-- batch_charge --
-- The rows batch $1 just took are charged to their groups' turns and, where the
-- pool has a spend cap, to its spend windows, at batch prices ($2: the money
-- plan; aiqueue_batch_charge in functions/75_batch.sql).  Run in batch_open's transaction.
SELECT aiqueue_batch_charge($1::bigint, $2::jsonb);

-- batch_refund --
-- What packing charged rows of batch $1 is given back ($2: only these; NULL:
-- all of them): the provider never had them, or they go live, where their
-- dispatch charges anew.  Run before batch_release and batch_fallback.
SELECT aiqueue_batch_refund($1::bigint, $2::uuid[]);

-- batch_submitted --
-- The provider took the batch.  Only while the record still says
-- 'submitting': a reconcile that gave its rows back meanwhile wins, and the
-- caller then cancels and deletes what it just created.
UPDATE ai_marking_batches
SET state = 'submitted', provider_batch_id = $2, files = $3::text[], submitted_at = now(),
    look_after = now() + make_interval(secs => $4::float8)
WHERE id = $1 AND state = 'submitting'
RETURNING id;

-- batch_release --
-- Give a batch's rows back to the waiting rows, with the attempt packing took:
-- the provider never had them ($2: only these; NULL: all of the batch's).  What
-- follows the move (functions/74_moved.sql): their groups join their turns,
-- once each.
WITH rows AS (
    UPDATE ai_marking_queue q
    SET status = 'pending', attempts = greatest(q.attempts - 1, 0), batch_id = NULL,
        started_at = NULL, updated_at = now(), queue_moves = q.queue_moves + 1
    WHERE q.batch_id = $1 AND q.status = 'processing'
      AND ($2::uuid[] IS NULL OR q.queue_id = ANY($2::uuid[]))
    RETURNING q.queue_id, q.dispatch_seq, q AS moved
),
followed AS (
    SELECT aiqueue_moved(array_agg(rows.moved),
                         array_fill('processing'::text, ARRAY[count(*)::int]))
    FROM rows
),
history AS (
    UPDATE ai_marking_attempts a SET ended_at = now(), outcome = 'batch_released'
    FROM rows WHERE a.queue_id = rows.queue_id AND a.dispatch_seq = rows.dispatch_seq
      AND a.kind = 'dispatch'
)
SELECT count(*) AS n, coalesce(array_agg(rows.queue_id), '{}') AS ids
FROM rows CROSS JOIN followed;

-- batch_abandon --
-- A batch the provider never created (or whose creation failed), or one whose
-- clearing is over: ended.
UPDATE ai_marking_batches SET state = 'abandoned', ended_at = now(), error = $2
WHERE id = $1 AND state IN ('submitting', 'clearing')
RETURNING id;

-- batch_abandon_open --
-- A batch nobody can ask the provider about any more (its pool no longer declares
-- a batch API, and its account is gone): ended, with why.
UPDATE ai_marking_batches SET state = 'abandoned', ended_at = now(), error = $2
WHERE id = $1 AND state NOT IN ('done', 'abandoned')
RETURNING id;

-- batches_due --
-- Batches to look at now, each taken for $2 seconds (another instance skips it).
WITH due AS (
    SELECT b.id FROM ai_marking_batches b
    WHERE b.pool = $1 AND b.state IN ('submitted', 'cancelling', 'ended')
      AND b.look_after <= now()
    ORDER BY b.look_after
    LIMIT 20
    FOR UPDATE SKIP LOCKED
)
UPDATE ai_marking_batches b SET look_after = now() + make_interval(secs => $2::float8)
FROM due WHERE b.id = due.id
RETURNING b.id, b.provider, b.model, b.provider_batch_id, b.files, b.state, b.rows, b.error,
          aiqueue_batch_tag(b.id) AS tag, date_part('epoch', b.created_at) AS created_at;

-- batch_rows --
-- The rows a batch still holds (those not yet resolved), with what the
-- function's parse needs to check a mark against.
SELECT q.queue_id, q.submission_id, q.assignment_id, q.attempts, q.dispatch_seq, q.deadline,
       q.kind, coalesce(pl.payload, '{}'::jsonb)::text AS payload, s.content, q.batch_id
FROM ai_marking_queue q JOIN submissions s ON s.id = q.submission_id
LEFT JOIN ai_marking_payloads pl ON pl.id = q.payload_id
WHERE q.batch_id = $1 AND q.status = 'processing';

-- batch_lines_failed --
-- Lines that errored, expired or could not be read ($1 ids, $2 dispatches, $3
-- codes, $4 retryable): an attempt is used, and the row waits for the next
-- batch, or goes live when its live time has come or it has been on the
-- batch lane for the provider's window ($6 seconds); failed when attempts
-- ($5; a kind's own, $7: {kind: n}) are used up or the failure is final.  Only
-- the dispatch in this batch.  What follows the move: functions/74_moved.sql (a
-- leader's heir goes live when the leader would have: its run_after before).
WITH lines AS (
    SELECT * FROM unnest($1::uuid[], $2::integer[], $3::text[], $4::boolean[])
        AS l (queue_id, dispatch_seq, code, retryable)
),
rows AS (
    UPDATE ai_marking_queue q
    SET status = CASE WHEN l.retryable
                           AND q.attempts < coalesce(($7::jsonb ->> q.kind)::integer, $5::integer)
                      THEN 'pending'
                      ELSE 'failed' END,
        finished_at = CASE WHEN l.retryable
                                AND q.attempts < coalesce(($7::jsonb ->> q.kind)::integer,
                                                          $5::integer)
                           THEN NULL
                           ELSE now() END,
        lane = CASE WHEN q.run_after <= now()
                      OR q.created_at + make_interval(secs => $6::float8) <= now()
                    THEN 'live' ELSE 'batch' END,
        run_after = CASE WHEN q.created_at + make_interval(secs => $6::float8) <= now()
                         THEN now() ELSE q.run_after END,
        batch_id = NULL, last_error = l.code, updated_at = now(), queue_moves = q.queue_moves + 1
    FROM lines l
    WHERE q.queue_id = l.queue_id AND q.dispatch_seq = l.dispatch_seq
      AND q.status = 'processing' AND q.batch_id IS NOT NULL
    RETURNING q.queue_id, q.dispatch_seq, q.status, l.code, q AS moved
),
-- The rows as the statement's snapshot has them: before the move, processing,
-- in the live part (its key written out: the months stay unopened, aiqueue 0078).
earlier AS (
    SELECT q.queue_id, q.run_after FROM ai_marking_queue q
    WHERE q.queue_id = ANY ($1::uuid[]) AND q.status IN ('pending', 'processing')
),
followed AS (
    SELECT aiqueue_moved(array_agg(rows.moved),
                         array_fill('processing'::text, ARRAY[count(*)::int]),
                         array_agg(b.run_after))
    FROM rows JOIN earlier b ON b.queue_id = rows.queue_id
),
history AS (
    UPDATE ai_marking_attempts a SET ended_at = now(), outcome = 'batch_failed', error = rows.code
    FROM rows WHERE a.queue_id = rows.queue_id AND a.dispatch_seq = rows.dispatch_seq
      AND a.kind = 'dispatch'
),
tally AS (
    INSERT INTO ai_marking_tally (outcome, job, error, n)
    SELECT 'batch_failed', CASE WHEN rows.status = 'failed' THEN 'failed' END, rows.code, count(*)
    FROM rows GROUP BY 2, 3
)
SELECT count(*) AS n, coalesce(array_agg(rows.queue_id), '{}') AS ids
FROM rows CROSS JOIN followed;

-- batch_fallback --
-- The deadline is near: the batch's unresolved rows go live now, with the
-- attempt the batch took (the provider did not fail them).  Their dispatch in
-- the batch stays valid for a result: whichever result comes first is applied.
-- What follows the move: functions/74_moved.sql.
WITH rows AS (
    UPDATE ai_marking_queue q
    SET status = 'pending', lane = 'live', run_after = now(), batch_id = NULL,
        attempts = greatest(q.attempts - 1, 0), updated_at = now(), queue_moves = q.queue_moves + 1
    WHERE q.batch_id = $1 AND q.status = 'processing'
    RETURNING q.queue_id, q.dispatch_seq, q AS moved
),
followed AS (
    SELECT aiqueue_moved(array_agg(rows.moved),
                         array_fill('processing'::text, ARRAY[count(*)::int]))
    FROM rows
),
history AS (
    UPDATE ai_marking_attempts a SET ended_at = now(), outcome = 'batch_fallback'
    FROM rows WHERE a.queue_id = rows.queue_id AND a.dispatch_seq = rows.dispatch_seq
      AND a.kind = 'dispatch'
)
SELECT count(*) AS n, coalesce(array_agg(rows.queue_id), '{}') AS ids
FROM rows CROSS JOIN followed;

-- batch_mark --
-- A batch's new state and the files the provider keeps for it; look again in
-- $4 seconds.
UPDATE ai_marking_batches
SET state = $2, files = $3::text[],
    ended_at = CASE WHEN $2 IN ('ended', 'done') THEN coalesce(ended_at, now()) END,
    deleted_at = CASE WHEN $2 = 'done' THEN now() END,
    look_after = now() + make_interval(secs => $4::float8)
WHERE id = $1;

-- batch_lines --
-- Every line a batch was sent with, matched to its row as it is now: still in
-- this batch (`held`), or gone on (fallen back, completed, re-packed).  Erased
-- rows are gone, so their lines match nothing and are never applied.
SELECT a.queue_id, a.dispatch_seq, a.attempt AS attempts, q.submission_id, q.assignment_id,
       q.deadline, q.kind, coalesce(pl.payload, '{}'::jsonb)::text AS payload, s.content,
       $1::bigint AS batch_id,
       (q.batch_id = $1 AND q.status = 'processing' AND q.dispatch_seq = a.dispatch_seq)
           AS held,
       q.phase = 'live' AS open
FROM ai_marking_attempts a
JOIN ai_marking_queue q ON q.queue_id = a.queue_id
JOIN submissions s ON s.id = q.submission_id
LEFT JOIN ai_marking_payloads pl ON pl.id = q.payload_id
WHERE a.dispatch_ref = 'batch:' || $1::bigint AND a.kind = 'dispatch';

-- batch_prune --
-- Records of batches long done (the provider keeps nothing of them any more),
-- in bounded runs.
DELETE FROM ai_marking_batches
WHERE id IN (SELECT id FROM ai_marking_batches
             WHERE state IN ('done', 'abandoned')
               AND coalesce(deleted_at, ended_at, created_at)
                   < now() - make_interval(secs => $1::float8)
             LIMIT 500);
