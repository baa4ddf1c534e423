-- The loop's writes (aiqueue/db/queue.py): claim, dispatch outcomes, results,
-- heartbeats, pruning and when the loop next needs to wake.
-- Values only ever travel as $n parameters (as in every sql/*.sql file).

-- claim --
-- Exactly one due row, under the in-flight cap, across every instance: see
-- aiqueue_claim() in functions/60_claim.sql (a plpgsql function so the server
-- caches its plan even through a transaction pooler).  $1: the claim plan
-- (ClaimPlan: pools, kinds, caps, budgets, breaker, window, money).
SELECT * FROM aiqueue_claim($1::jsonb);

-- can_claim --
-- Would a claim succeed right now?  Decides whether to chain.  $1: the claim
-- plan.  The kinds with room are asked once (not per row), and a row of a
-- group paused at a spend cap does not count (aiqueue_due_exists).
WITH room AS MATERIALIZED (
    SELECT (aiqueue_room($1::jsonb, false, false)).kinds
)
SELECT aiqueue_due_exists(room.kinds, $1::jsonb, NULL) AS ok FROM room;

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
-- aiqueue_flow_refused() in functions/20_flow.sql.  $7: the pools (NULL: default,
-- cap $6); $8: the model's window the refusal tells (NULL: none).
SELECT aiqueue_flow_refused($1::uuid, $2::integer, $3::text, $4::float8, $5::float8,
                            $6::integer, $7::jsonb, $8::float8) AS status;

-- attempt_failed --
-- A failed attempt (dispatch error, failed callback, bad sync answer): back to
-- pending after the backoff, or failed when attempts are used up or the
-- failure is final.  Only the row's current dispatch can fail it.  A kind may
-- allow its own number of attempts ($8: {kind: n}; else $5).  See
-- aiqueue_attempt_failed() in functions/20_flow.sql (the live part alone); no
-- row when the dispatch was not the row's current one.
SELECT f.status
FROM aiqueue_attempt_failed($1::uuid, $2::integer, $3::float8, $4::boolean, $5::integer,
                            $6::text, $7::text, $8::jsonb) AS f (status)
WHERE f.status IS NOT NULL;

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
-- Applies a result at most once and, when it was new, what follows a result:
-- see aiqueue_result() in functions/70_settle.sql.  $5: the claim plan.
SELECT (aiqueue_result($1::uuid, $2::jsonb, $3::jsonb, $4::integer, $5::jsonb)).queue_id
       IS NOT NULL AS applied;

-- settle --
-- A webhook's completed results, each with the next claim, in one round trip
-- and one commit: see aiqueue_settle_many() in functions/70_settle.sql.  $1:
-- the items; $2: the claim plan; $3: the caller's token (its hand-offs).
SELECT * FROM aiqueue_settle_many($1::jsonb, $2::jsonb, $3::uuid);

-- cache_key --
-- A dispatch's prompt cache key: the payload's hash, sharded by key_rpm ($2;
-- aiqueue_cache_key in functions/45_cache.sql).
SELECT aiqueue_cache_key($1::uuid, $2::integer);

-- heartbeat --
-- A progress item from the current dispatch extends its lease (also when a late
-- result completed the row meanwhile: the function is still working on it);
-- while the row is processing it goes to the live feed (aiqueue_heartbeat in
-- functions/80_feed.sql).  A row when the dispatch's row was found.
SELECT 1 AS found WHERE aiqueue_heartbeat($1::uuid, $2::integer, $3::jsonb);

-- prune_due --
-- Whether the prune's gate is open, read before the prune: its statement names
-- every month of the tables it deletes from, and planning it locks each of them
-- (hundreds of relations with a year of months), though it deletes once a
-- minute; an instance asks every second.  The prune's own gate still decides.
SELECT last_prune_at < now() - interval '60 seconds' AS due FROM ai_queue_control WHERE id = 1

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
-- A prompt prefix unused for a week is cold and past the doctor's look
-- (functions/45_cache.sql); a few rows per payload, read by primary key.
prefixes AS (
    DELETE FROM ai_marking_prefixes
    WHERE dispatched_at < now() - interval '8 days' AND EXISTS (SELECT 1 FROM gate)
),
-- Idempotency keys answer repeats for 24 h.
keys AS (
    DELETE FROM ai_marking_idempotency
    WHERE key IN (SELECT key FROM ai_marking_idempotency
                  WHERE created_at < now() - interval '24 hours' AND EXISTS (SELECT 1 FROM gate)
                  LIMIT 10000)
),
-- Fold the count deltas into one row per status, kind, pool and month (the
-- sums stay; a month's drop removes its rows: functions/98_record_months.sql).
folded AS (
    DELETE FROM ai_marking_counts WHERE EXISTS (SELECT 1 FROM gate)
    RETURNING status, kind, pool, month, n
),
refolded AS (
    INSERT INTO ai_marking_counts (status, kind, pool, month, n)
    SELECT status, kind, pool, month, sum(n) FROM folded GROUP BY status, kind, pool, month
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
-- use (migration 0014): aiqueue_payload_named (functions/82_rows.sql) probes
-- the list index per status, newest first, and finds one at once while any is
-- left.  (A function's answer, not NOT EXISTS: the planner turns that into an
-- anti-join over the whole queue, 0.4 s at 600,000 rows.)  The
-- last_used_at test is on the deleted row itself, so an enqueue that reuses
-- the payload meanwhile (its upsert moves last_used_at under the row lock)
-- makes this delete skip it.
payloads AS (
    DELETE FROM ai_marking_payloads p
    WHERE p.last_used_at < now() - interval '1 hour'
      AND p.id IN (
          SELECT x.id FROM ai_marking_payloads x
          WHERE x.last_used_at < now() - interval '1 hour' AND EXISTS (SELECT 1 FROM gate)
            AND NOT aiqueue_payload_named(x.id, x.first_used_at, x.last_used_at,
                                          '{}'::uuid[])
          LIMIT 100)
),
gone AS (
    DELETE FROM ai_marking_queue
    WHERE queue_id IN (
        SELECT queue_id FROM ai_marking_queue
        WHERE phase = 'completed' AND finished_at < now() - make_interval(secs => $1::float8)
          -- not while it still holds a slot (see aiqueue_complete)
          AND NOT EXISTS (SELECT 1 FROM ai_marking_claimed c
                          WHERE c.queue_id = ai_marking_queue.queue_id)
          AND EXISTS (SELECT 1 FROM gate)
        LIMIT 5000)
    RETURNING queue_id, created_at
),
-- Their attempt history goes with them (no foreign key cascades into the month
-- partitions, functions/97_partitions.sql); an attempt starts after its row was
-- created, so only those months are read.
gone_attempts AS (
    DELETE FROM ai_marking_attempts a USING gone g
    WHERE a.queue_id = g.queue_id AND a.started_at >= aiqueue_months_from(g.created_at)
)
SELECT count(*) AS n FROM gone;

-- next_wakeup --
-- Seconds until something needs the process step: a due row once its pool's
-- gate opens (aiqueue_claim_opens_at: a hold or a breaker cool-down ending, a
-- budget window refilling, per pool; NULL while paused, full, or a half-open
-- probe is out), or a lease running out.  $1: the claim plan.
WITH opens AS (
    SELECT aiqueue_claim_opens_at($1::jsonb) AS at
)
SELECT extract(epoch FROM least(
    -- least() skips NULLs: a closed gate or no due row makes the term NULL.
    (SELECT opens.at FROM opens),
    -- A lease running out (aiqueue_leases_end in functions/95_recovery.sql:
    -- aiqueue_recover_at; $3 heartbeat timeout, $4 the platform's bound), not
    -- before a look the platform asked us to wait for.  With $5 (the platform is
    -- asked first), a dispatch with an invocation id is looked at once quiet for
    -- $6 (aiqueue/recovery.py: the heartbeat timeout or 3x the recent p95
    -- processing time, whichever comes first).
    aiqueue_leases_end($2::float8, $3::float8, $4::float8, $5::boolean, $6::float8)
) - now())::float8 AS seconds;

-- set_dispatch_ref --
-- The platform's id for an accepted dispatch (activation id, request id), on
-- the history line the claim opened for it.  A plain statement after the
-- accept: only the digitalocean and lambda targets pay this round trip.
UPDATE ai_marking_attempts SET dispatch_ref = $3
WHERE queue_id = $1 AND dispatch_seq = $2 AND kind = 'dispatch';
