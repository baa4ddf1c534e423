-- Recovery (aiqueue/queue/recovery.py): the sweep of quiet rows, and asking the
-- platform before recovering a row (docs/guarantees.md).  The HTTP call to the
-- platform runs between these statements, never inside a transaction: each
-- statement here is short and decides on what it finds.

-- recover_stuck --
-- Rows whose function went quiet: no result and no heartbeat for
-- QUEUE_STUCK_AFTER_SECONDS ($1) after the dispatch, or for the heartbeat
-- timeout ($3) after the last heartbeat, or past the platform's bound ($4:
-- dispatch + the function's time limit + a grace; NULL: none); see
-- aiqueue_recover_at().  Retry now (the lease already waited) or fail when
-- attempts are used up.  With $5 the platform is asked before a row with an
-- invocation id is recovered (digitalocean: aiqueue/queue/recovery.py), so
-- those are left to it.  Only rows of the kinds that dispatch to this platform
-- ($7, $8).  The old dispatch_seq can no longer fail the row; a late
-- completed result is still welcome.
WITH stuck AS (
    SELECT q.queue_id,
           CASE WHEN q.started_at + make_interval(secs => $4::float8) <= now()
                THEN 'platform_timeout'
                WHEN q.progress IS NOT NULL THEN 'heartbeat_timeout'
                ELSE 'stuck_no_result' END AS why
    FROM ai_marking_claimed c
    JOIN ai_marking_queue q ON q.queue_id = c.queue_id
    -- A range of ai_marking_claimed_lease_idx first (with QUEUE_MAX_IN_FLIGHT=0
    -- many rows may hold a lease): no term is due before the shortest threshold
    -- has passed since the lease (an invocation cannot outlive its platform's
    -- limit, so it has stopped heartbeating by then).
    WHERE q.status = 'processing'
      AND c.lease_at <= now() - make_interval(secs => least($1::float8, $3::float8, $4::float8))
      AND aiqueue_recover_at(c.lease_at, q.started_at, q.progress IS NOT NULL, NULL,
                             $1::float8, $3::float8, $4::float8) <= now()
      AND NOT ($5::boolean AND EXISTS (
          SELECT 1 FROM ai_marking_attempts a
          WHERE a.queue_id = q.queue_id AND a.dispatch_seq = q.dispatch_seq
            AND a.kind = 'dispatch' AND a.dispatch_ref IS NOT NULL))
      -- Each kind by its own platform's thresholds ($7 these kinds; NULL: all but $8).
      AND aiqueue_kind_in(q.kind, $7::text[], $8::text[])
    ORDER BY c.lease_at
    LIMIT 500
    FOR UPDATE OF q SKIP LOCKED
),
row AS (
    UPDATE ai_marking_queue q
    -- A kind may allow its own number of attempts ($6: {kind: n}; else $2).
    SET status = CASE WHEN q.attempts < coalesce(($6::jsonb ->> q.kind)::integer, $2::integer)
                      THEN 'pending' ELSE 'failed' END,
        finished_at = CASE WHEN q.attempts < coalesce(($6::jsonb ->> q.kind)::integer,
                                                      $2::integer)
                           THEN NULL ELSE now() END,
        run_after = now(), last_error = stuck.why, updated_at = now(),
        queue_moves = q.queue_moves + 1
    FROM stuck WHERE q.queue_id = stuck.queue_id
      AND q.status IN ('pending', 'processing')  -- the live part alone (aiqueue 0078)
    RETURNING q.queue_id, q.dispatch_seq, q.created_at, q.status, stuck.why, q AS moved
),
-- What follows the move (functions/74_moved.sql): back to pending or failed.  A
-- dispatched row went live when it was claimed (its run_after had come).
followed AS (
    SELECT aiqueue_moved(array_agg(row.moved), array_fill('processing'::text, ARRAY[count(*)::int]),
                         array_fill(now(), ARRAY[count(*)::int]))
    FROM row
),
free AS (
    DELETE FROM ai_marking_claimed c USING row WHERE c.queue_id = row.queue_id
),
-- Each dispatch's history line ends `stuck`, looked for in the attempts' months
-- since its row was created (aiqueue_attempt_stuck, functions/95_recovery.sql).
history AS (
    SELECT count(aiqueue_attempt_stuck(row.queue_id, row.dispatch_seq, row.created_at,
                                       row.why)) AS n
    FROM row
),
tally AS (
    INSERT INTO ai_marking_tally (outcome, job, error, n)
    SELECT 'stuck', CASE WHEN row.status = 'failed' THEN 'failed' END, row.why, count(*)
    FROM row GROUP BY 2, 3
)
-- Completed rows still holding a slot for a newer dispatch that never reported:
-- aiqueue_slots_released (functions/95_recovery.sql), which reads the ended
-- months only when such a slot's lease has run out (a call in the select list
-- runs once, whether or not a row was recovered).
SELECT count(*) AS n, aiqueue_slots_released($1::float8, $3::float8, $4::float8) AS released,
       (SELECT history.n FROM history) AS ended
FROM row CROSS JOIN followed;

-- take_lookups --
-- Up to $4 dispatches whose time to ask has come (aiqueue_recover_at with the
-- platform's look threshold $1 = $2 and its bound $3), each taken for $5
-- seconds: another instance skips it meanwhile (SKIP LOCKED now, look_after
-- after the commit).  Only rows of the kinds that dispatch to this platform
-- ($6 these kinds; NULL: every kind but $7).  `past_bound`: the platform's
-- time limit and grace have run out by the database's clock, so "not found"
-- now means gone.
WITH due AS (
    SELECT a.id
    FROM ai_marking_claimed c
    JOIN ai_marking_queue q ON q.queue_id = c.queue_id
    JOIN ai_marking_attempts a ON a.queue_id = q.queue_id AND a.dispatch_seq = q.dispatch_seq
         AND a.kind = 'dispatch'
    WHERE q.status = 'processing' AND a.dispatch_ref IS NOT NULL
      AND aiqueue_recover_at(c.lease_at, q.started_at, q.progress IS NOT NULL, a.look_after,
                             $1::float8, $2::float8, $3::float8) <= now()
      AND aiqueue_kind_in(q.kind, $6::text[], $7::text[])
    ORDER BY c.lease_at
    LIMIT $4
    FOR UPDATE OF a SKIP LOCKED
)
UPDATE ai_marking_attempts a SET look_after = now() + make_interval(secs => $5::float8)
FROM due, ai_marking_queue q
WHERE a.id = due.id AND q.queue_id = a.queue_id
  AND q.status IN ('pending', 'processing')  -- the live part alone (aiqueue 0078)
RETURNING a.queue_id, a.dispatch_seq, a.attempt, a.dispatch_ref,
          q.started_at + make_interval(secs => $3::float8) <= now() AS past_bound;

-- platform_waits --
-- What the platform said about one dispatch, and when to ask again ($4
-- seconds from now, capped at its bound $5 seconds after the dispatch; NULL:
-- no need).  Only while that dispatch is still the row's current one.
UPDATE ai_marking_attempts a
SET platform = $3,
    look_after = least(now() + make_interval(secs => $4::float8),
                       q.started_at + make_interval(secs => $5::float8))
FROM ai_marking_queue q
WHERE a.queue_id = $1 AND a.dispatch_seq = $2 AND a.kind = 'dispatch'
  AND q.queue_id = a.queue_id AND q.dispatch_seq = $2 AND q.status = 'processing';

-- platform_said --
-- The platform's word on a dispatch that just ended (applied from the
-- activation, activation failed, timed out): kept on its history line.
UPDATE ai_marking_attempts SET platform = $3, look_after = NULL
WHERE queue_id = $1 AND dispatch_seq = $2 AND kind = 'dispatch';

-- recent_processing_tail --
-- The recent p95 processing time (dispatch to result, seconds): the last
-- hour's results, the newest 200 at most (the BRIN index on applied_at keeps
-- this a short range scan); from the first result on (a few results: about
-- the slowest), NULL with none.  A result the queue found by asking the
-- platform is left out: its time is how long its lost callback was waited for
-- (the look's own threshold), and counting it would lengthen the next wait.
SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY r.processing_seconds)
FROM (SELECT x.processing_seconds FROM ai_marking_results x
      WHERE x.applied_at > now() - interval '1 hour' AND x.processing_seconds IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM ai_marking_attempts a
                        WHERE a.queue_id = x.queue_id AND a.kind = 'dispatch'
                          AND a.platform IS NOT NULL)
      ORDER BY x.applied_at DESC LIMIT 200) r;
