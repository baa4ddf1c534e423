-- The loop's writes (aiqueue/db/queue.py): claim, dispatch outcomes, results,
-- heartbeats, the hand-off, pruning and when the loop next needs to wake.
-- Values only ever travel as $n parameters (as in every sql/*.sql file).

-- claim --
-- Exactly one due row, under the in-flight cap, across every instance: see
-- aiqueue_claim() in functions.sql (a plpgsql function so the server caches
-- its plan even through a transaction pooler).
-- $3..$5: the declared budget (aiqueue 0010; 0 = none); $6: the pools and kinds
-- (aiqueue 0019; NULL: the default pool with $1, $3 and $4).
-- $7: the pools' caps and prices (aiqueue 0022, Money.doc; NULL: none).
SELECT * FROM aiqueue_claim($1::integer, $2::integer, $3::integer, $4::integer, $5::float8,
                            $6::jsonb, $7::jsonb);

-- can_claim --
-- Would a claim succeed right now?  Decides whether to chain.  $3: the pools
-- and kinds (NULL: the default pool with cap $1).  The kinds with room are
-- asked once (not per row), and a row of a group paused at a spend cap does
-- not count (aiqueue_due_exists).
WITH p AS MATERIALIZED (
    SELECT coalesce($3::jsonb, aiqueue_default_plan($1::integer, 0, 0)) AS plan
), room AS MATERIALIZED (
    SELECT p.plan, (aiqueue_room(p.plan, $2::integer, 60, false, false)).kinds FROM p
)
SELECT aiqueue_due_exists(room.kinds, room.plan, NULL) AS ok FROM room;

-- dispatch_accepted --
-- A 2xx ack closes its pool's breaker ($1); the WHERE keeps the common case
-- write-free.
UPDATE ai_queue_control
SET consecutive_failures = 0, circuit_open_until = NULL
WHERE pool = $1::text AND (consecutive_failures <> 0 OR circuit_open_until IS NOT NULL);

-- refused --
-- A refusal of the row's current dispatch (a 429/503 answer, or a
-- rate_limited/overloaded item): back to pending without using an attempt, the
-- row's pool held for the delay, its L cut once per burst.  See
-- aiqueue_flow_refused() in functions.sql.  $7: the pools (NULL: default, cap $6).
SELECT aiqueue_flow_refused($1::uuid, $2::integer, $3::text, $4::float8, $5::float8,
                            $6::integer, $7::jsonb) AS status;

-- attempt_failed --
-- A failed attempt (dispatch error, failed callback, bad sync answer): back to
-- pending after the backoff, or failed when attempts are used up or the
-- failure is final.  Only the row's current dispatch can fail it.  A kind may
-- allow its own number of attempts ($8: {kind: n}; else $5).
WITH row AS (
    UPDATE ai_marking_queue
    SET status = CASE WHEN $4::boolean AND attempts < coalesce(($8::jsonb ->> kind)::integer,
                                                               $5::integer)
                      THEN 'pending' ELSE 'failed' END,
        run_after = now() + make_interval(secs => $3::float8),
        finished_at = CASE WHEN $4::boolean AND attempts < coalesce(($8::jsonb ->> kind)::integer,
                                                                    $5::integer)
                           THEN NULL ELSE now() END,
        lease_at = NULL, last_error = $6, updated_at = now()
    WHERE queue_id = $1 AND status = 'processing' AND dispatch_seq = $2
    RETURNING queue_id, status
),
history AS (
    UPDATE ai_marking_attempts a SET ended_at = now(), outcome = $7, error = $6
    FROM row WHERE a.queue_id = row.queue_id AND a.dispatch_seq = $2 AND a.kind = 'dispatch'
),
-- A late result completed the row while this dispatch was out: nothing to
-- fail, but the slot it held is free now.
release AS (
    UPDATE ai_marking_queue SET lease_at = NULL
    WHERE queue_id = $1 AND status = 'completed' AND dispatch_seq = $2 AND lease_at IS NOT NULL
),
-- The /metrics counters (migration 0008): one delta per ended attempt.
tally AS (
    INSERT INTO ai_marking_tally (outcome, job, error)
    SELECT $7, CASE WHEN row.status = 'failed' THEN 'failed' END, $6 FROM row
)
SELECT status FROM row;

-- breaker_failure --
-- Counts a dispatch failure of pool $3; at the threshold its breaker opens for
-- the cool-down.
UPDATE ai_queue_control
SET consecutive_failures = consecutive_failures + 1,
    circuit_open_until = CASE WHEN consecutive_failures + 1 >= $1::integer
                              THEN now() + make_interval(secs => $2::float8)
                              ELSE circuit_open_until END
WHERE pool = $3::text
RETURNING consecutive_failures, circuit_open_until;

-- complete --
-- Applies a result at most once; see aiqueue_complete() in functions.sql.  A new
-- result also raises the learned limit and ($6: a budget is declared) corrects
-- the budget window (aiqueue_flow_result, aiqueue 0010).
WITH done AS MATERIALIZED (
    SELECT aiqueue_complete($1::uuid, $2::jsonb, $3::jsonb, $4::integer) AS applied
)
-- The result's usage also corrects its dispatch's charge ($8: the pools' caps
-- and prices, aiqueue_money_result, aiqueue 0022).
SELECT done.applied,
       CASE WHEN done.applied THEN aiqueue_flow_result($1::uuid, $4::integer, $3::jsonb,
                                                       $5::integer, $6::boolean, $7::jsonb)
       END AS flowed,
       CASE WHEN done.applied THEN aiqueue_money_result($1::uuid, $4::integer, $3::jsonb,
                                                        $8::jsonb) END AS charged
FROM done;

-- settle --
-- A completed result and the next claim in one round trip and one commit: see
-- aiqueue_settle() in functions.sql.
-- $10: the pools and kinds (aiqueue 0019); $11: their caps and prices (aiqueue 0022).
SELECT * FROM aiqueue_settle($1::uuid, $2::jsonb, $3::jsonb, $4::integer, $5::integer,
                             $6::integer, $7::integer, $8::integer, $9::float8, $10::jsonb,
                             $11::jsonb);

-- heartbeat --
-- A progress item from the current dispatch extends its lease (also when a late
-- result completed the row meanwhile: the function is still working on it).
-- While the row is processing, the item also goes to the live feed (a
-- `processing` event), so a teacher's page shows it.  The feed keeps only the
-- counts: the message may quote the answer, and the feed is kept for a day;
-- live_events_after reads the message from the row while it is processing.
WITH row AS (
    UPDATE ai_marking_queue
    SET lease_at = now(), progress = $3::jsonb, updated_at = now()
    WHERE queue_id = $1 AND dispatch_seq = $2
      AND (status = 'processing' OR (status = 'completed' AND lease_at IS NOT NULL))
    RETURNING queue_id, submission_id, assignment_id, status
),
event AS (
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, summary)
    SELECT assignment_id, queue_id, submission_id, status,
           jsonb_build_object('progress', jsonb_strip_nulls(jsonb_build_object(
               'current', $3::jsonb -> 'current', 'total', $3::jsonb -> 'total')))
    FROM row WHERE status = 'processing'
    RETURNING 1
)
-- The scalar subquery wakes listeners once when an event was written.
SELECT row.queue_id, (SELECT aiqueue_notify() FROM event LIMIT 1) IS NULL AS quiet
FROM row;

-- prune --
-- At most once a minute across all instances (the control row is the gate), in
-- bounded batches so one call never holds locks for long.
WITH gate AS (
    UPDATE ai_queue_control SET last_prune_at = now()
    WHERE id = 1 AND last_prune_at < now() - interval '60 seconds'
    RETURNING 1
),
events AS (
    DELETE FROM ai_marking_events
    WHERE id IN (SELECT id FROM ai_marking_events
                 WHERE created_at < now() - interval '1 day' AND EXISTS (SELECT 1 FROM gate)
                 LIMIT 10000)
),
-- Spend windows (aiqueue 0022) older than two days hold no window a cap reads.
spend AS (
    DELETE FROM ai_marking_spend
    WHERE starts_at < now() - interval '2 days' AND EXISTS (SELECT 1 FROM gate)
),
-- Idempotency keys answer repeats for 24 h.
keys AS (
    DELETE FROM ai_marking_idempotency
    WHERE key IN (SELECT key FROM ai_marking_idempotency
                  WHERE created_at < now() - interval '24 hours' AND EXISTS (SELECT 1 FROM gate)
                  LIMIT 10000)
),
-- Fold the count deltas into one row per status, kind and pool (the sums stay).
folded AS (
    DELETE FROM ai_marking_counts WHERE EXISTS (SELECT 1 FROM gate)
    RETURNING status, kind, pool, n
),
refolded AS (
    INSERT INTO ai_marking_counts (status, kind, pool, n)
    SELECT status, kind, pool, sum(n) FROM folded GROUP BY status, kind, pool
),
-- The same for the counters' deltas (migration 0008).
tally_folded AS (
    DELETE FROM ai_marking_tally WHERE EXISTS (SELECT 1 FROM gate) RETURNING *
),
tally_refolded AS (
    INSERT INTO ai_marking_tally (outcome, job, error, model, le, n, prompt_tokens,
                                  completion_tokens, cost_usd, seconds)
    SELECT outcome, job, error, model, le, sum(n), sum(prompt_tokens), sum(completion_tokens),
           sum(cost_usd), sum(seconds)
    FROM tally_folded GROUP BY outcome, job, error, model, le
),
-- Payloads no row names any more (their rows were pruned, or deleted with their
-- submissions; this statement's own deletions count from the next run on),
-- unused for an hour.  A payload's rows were all created within its window of
-- use (migration 0014), the newest at last_used_at: one probe per payload of
-- ai_marking_queue_created_idx, newest first, finds one at once while any is
-- left.  (A correlated LIMIT 1, not NOT EXISTS: the planner turns that into
-- an anti-join over the whole queue, 0.4 s at 600,000 rows.)  The
-- last_used_at test is on the deleted row itself, so an enqueue that reuses
-- the payload meanwhile (its upsert moves last_used_at under the row lock)
-- makes this delete skip it.
payloads AS (
    DELETE FROM ai_marking_payloads p
    WHERE p.last_used_at < now() - interval '1 hour'
      AND p.id IN (
          SELECT x.id FROM ai_marking_payloads x
          WHERE x.last_used_at < now() - interval '1 hour' AND EXISTS (SELECT 1 FROM gate)
            AND (SELECT q.payload_id FROM ai_marking_queue q
                 WHERE q.created_at BETWEEN x.first_used_at AND x.last_used_at
                   AND q.payload_id = x.id
                 ORDER BY q.created_at DESC LIMIT 1) IS NULL
          LIMIT 100)
),
gone AS (
    DELETE FROM ai_marking_queue
    WHERE queue_id IN (
        SELECT queue_id FROM ai_marking_queue
        WHERE status = 'completed' AND finished_at < now() - make_interval(secs => $1::float8)
          AND lease_at IS NULL  -- not while it still holds a slot (see aiqueue_complete)
          AND EXISTS (SELECT 1 FROM gate)
        LIMIT 5000)
    RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- next_wakeup --
-- Seconds until something needs the process step: a due row once its pool's
-- gate opens (aiqueue_claim_opens_at: a hold or a breaker cool-down ending, a
-- budget window refilling, per pool; NULL while paused, full, or a half-open
-- probe is out), or a lease running out.  $7/$8/$9: the default pool's budget
-- (aiqueue 0010); $10: the pools and kinds (aiqueue 0019; NULL: the default
-- pool with cap $1).
WITH opens AS (
    SELECT aiqueue_claim_opens_at(
        coalesce($10::jsonb, aiqueue_default_plan($1::integer, $7::integer, $8::integer)),
        $2::integer, $9::float8) AS at
)
SELECT extract(epoch FROM least(
    -- least() skips NULLs: a closed gate or no due row makes the term NULL.
    (SELECT opens.at FROM opens),
    -- A lease running out (aiqueue_recover_at; $4 heartbeat timeout, $5 the
    -- platform's bound), not before a look the platform asked us to wait for.
    -- With $6 (the platform is asked first), a dispatch with an invocation id is
    -- looked at once quiet for $11 (aiqueue/queue/recovery.py: the heartbeat timeout
    -- or 3x the recent p95 processing time, whichever comes first).
    (SELECT min(aiqueue_recover_at(
                q.lease_at, q.started_at, q.progress IS NOT NULL OR asked, a.look_after,
                $3::float8, CASE WHEN asked THEN $11::float8 ELSE $4 END,
                $5::float8))
     FROM ai_marking_queue q
     LEFT JOIN ai_marking_attempts a ON a.queue_id = q.queue_id
          AND a.dispatch_seq = q.dispatch_seq AND a.kind = 'dispatch',
     LATERAL (SELECT $6::boolean AND a.dispatch_ref IS NOT NULL
                     AND q.status = 'processing' AS asked) l
     WHERE q.lease_at IS NOT NULL)
) - now())::float8 AS seconds;

-- take_handoff --
-- The app takes a row a settle claimed, just before sending it (CONTRACT §9a):
-- false when another taker had it already (aiqueue_take_handoff).
SELECT aiqueue_take_handoff($1::uuid, $2::integer);

-- set_dispatch_ref --
-- The platform's id for an accepted dispatch (activation id, request id), on
-- the history line the claim opened for it.  A plain statement after the
-- accept: only the digitalocean and lambda targets pay this round trip.
UPDATE ai_marking_attempts SET dispatch_ref = $3
WHERE queue_id = $1 AND dispatch_seq = $2 AND kind = 'dispatch';
