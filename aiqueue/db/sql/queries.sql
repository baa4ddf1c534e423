-- Every statement aiqueue runs, as named blocks ("-- name --" headers).
-- Values only ever travel as $n parameters.

-- enqueue --
-- One round trip for the whole batch, atomic: when any id is unknown nothing is
-- inserted and the unknown ids come back instead.  Submissions with an AI mark
-- are left out unless $6 (remark) and come back as 'marked', and so are those
-- that already have a live row.  A concurrent enqueue (or retry) that gives one
-- of them a live row after this statement's snapshot makes the insert fail on
-- the partial unique index: Store.enqueue runs the statement again, and the
-- second run skips it.  (ON CONFLICT DO NOTHING would skip it in place, but its
-- speculative insertion costs 16 ms of 10,000 rows for a race that is rare.)
-- Rows are inserted in submission-id order so that two overlapping batches
-- take their index locks in the same order; seq, numbered in request order
-- first, keeps the queue in the order the teacher's list had.  A batch joins
-- the assignment's live run.
--
-- Turns (migration 0007): the group's k-th new row gets turn start + k, where
-- start is the turn after the group's last one, or the turn at the head of
-- this priority's due rows when the group has emptied (it rejoins at the back
-- of the round being served); with no due row at all, the turn after every
-- group's last, so turns never run backwards.  The upsert of the group's row
-- computes start under that row's lock: concurrent enqueues of one group get
-- consecutive turns.
--
-- The payload ($4, JSON text) is stored once per distinct content (migration
-- 0014), not in every row: the upsert finds the row of an equal payload or
-- adds one, and widens its window of use to this transaction's now(), which
-- is also the new rows' created_at (prune relies on it; the row lock it takes
-- makes a concurrent prune re-check and keep the payload).  '{}' and a batch
-- that inserts nothing store none.
--
-- Pools (migration 0019): the rows carry their kind ($7) and its pool ($8),
-- and turns are the pool's: the head and the group's last turn are its own.
-- $9 not_before and $10 expires_at (aiqueue 0018, CONTRACT §9d; NULL: none).
WITH ids AS MATERIALIZED (
    SELECT DISTINCT ON (id) id, ord
    FROM unnest($1::uuid[]) WITH ORDINALITY AS t (id, ord)
    ORDER BY id, ord
),
subs AS MATERIALIZED (
    SELECT ids.id, ids.ord, s.id IS NOT NULL AS known, s.ai_marked_at IS NOT NULL AS marked
    FROM ids LEFT JOIN submissions s ON s.id = ids.id
),
todo AS MATERIALIZED (
    SELECT o.id, o.k, nextval('ai_marking_queue_seq_seq'::regclass) AS seq
    FROM (SELECT x.id, row_number() OVER (ORDER BY x.ord) - 1 AS k
          FROM subs x
          WHERE (NOT x.marked OR $6::boolean)
            AND NOT EXISTS (SELECT 1 FROM ai_marking_queue q
                            WHERE q.submission_id = x.id AND q.status IN ('pending', 'processing'))
            AND NOT EXISTS (SELECT 1 FROM subs u WHERE NOT u.known)
          ORDER BY x.ord) o
),
total AS (
    SELECT count(*) AS n FROM todo
),
head AS (
    SELECT coalesce(
        (SELECT q.turn FROM ai_marking_queue q
         WHERE q.status = 'pending' AND q.priority = $3 AND q.run_after <= now()
           AND q.pool = $8::text
         ORDER BY q.priority DESC, q.turn, q.seq LIMIT 1),
        (SELECT max(g.last_turn) + 1 FROM ai_marking_groups g
         WHERE g.pool = $8::text AND g.priority = $3),
        0) AS turn
),
grp AS (
    INSERT INTO ai_marking_groups AS g (pool, priority, group_key, last_turn)
    SELECT $8::text, $3, $5, head.turn + total.n - 1 FROM head, total WHERE total.n > 0
    ON CONFLICT (pool, priority, group_key) DO UPDATE
    SET last_turn = greatest(g.last_turn + (SELECT n FROM total), EXCLUDED.last_turn),
        updated_at = now()
    RETURNING last_turn
),
run AS (
    SELECT coalesce(
        (SELECT run_id FROM ai_marking_queue
         WHERE assignment_id = $2 AND status IN ('pending', 'processing') LIMIT 1),
        gen_random_uuid()) AS run_id
),
payload AS (
    INSERT INTO ai_marking_payloads AS p (sha256, payload)
    SELECT sha256(convert_to(x.doc::text, 'UTF8')), x.doc
    FROM (SELECT $4::jsonb AS doc) x, total
    WHERE x.doc <> '{}'::jsonb AND total.n > 0
    ON CONFLICT (sha256) DO UPDATE
    SET first_used_at = least(p.first_used_at, now()),
        last_used_at = greatest(p.last_used_at, now())
    RETURNING p.id
),
inserted AS (
    INSERT INTO ai_marking_queue (seq, submission_id, assignment_id, group_key, turn, run_id,
                                  priority, payload_id, kind, pool, not_before, run_after,
                                  expires_at)
    OVERRIDING SYSTEM VALUE
    SELECT t.seq, t.id, $2, nullif($5, $2), grp.last_turn - total.n + 1 + t.k, run.run_id, $3,
           (SELECT id FROM payload), $7::text, $8::text,
           -- Not before $9 (§9d): not due until then, like a retry's backoff.
           $9::timestamptz, coalesce($9::timestamptz, now()), $10::timestamptz
    FROM todo t CROSS JOIN grp CROSS JOIN total CROSS JOIN run
    ORDER BY t.id
    RETURNING queue_id, seq
)
SELECT 'unknown' AS kind, id AS value, 0::bigint AS seq FROM subs WHERE NOT known
UNION ALL
SELECT 'marked', id, 0 FROM subs WHERE known AND marked AND NOT $6::boolean
UNION ALL
SELECT 'queued', queue_id, seq FROM inserted
ORDER BY seq;

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
-- A 2xx ack closes its pool's breaker ($1) and ends its run of refusals (the
-- pool takes work again: its kinds' rows come back from a fallback); the WHERE
-- keeps the common case write-free.
UPDATE ai_queue_control
SET consecutive_failures = 0, circuit_open_until = NULL, refused_since = NULL
WHERE pool = $1::text AND (consecutive_failures <> 0 OR circuit_open_until IS NOT NULL
                           OR refused_since IS NOT NULL);

-- flow_refused --
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

-- recover_stuck --
-- Rows whose function went quiet: no result and no heartbeat for
-- QUEUE_STUCK_AFTER_SECONDS ($1) after the dispatch, or for the heartbeat
-- timeout ($3) after the last heartbeat, or past the platform's bound ($4:
-- dispatch + the function's time limit + a grace; NULL: none); see
-- aiqueue_recover_at().  Retry now (the lease already waited) or fail when
-- attempts are used up.  With $5 the platform is asked before a row with an
-- invocation id is recovered (digitalocean: aiqueue/recovery.py), so those are
-- left to it.  Only rows of the kinds that dispatch to this platform ($7, $8).  The old dispatch_seq can no longer fail the row; a late
-- completed result is still welcome.
WITH stuck AS (
    SELECT q.queue_id,
           CASE WHEN q.started_at + make_interval(secs => $4::float8) <= now()
                THEN 'platform_timeout'
                WHEN q.progress IS NOT NULL THEN 'heartbeat_timeout'
                ELSE 'stuck_no_result' END AS why
    FROM ai_marking_queue q
    -- A range of ai_marking_queue_lease_idx first (with QUEUE_MAX_IN_FLIGHT=0 many
    -- rows may hold a lease): no term is due before the shortest threshold has
    -- passed since the lease (an invocation cannot outlive its platform's limit,
    -- so it has stopped heartbeating by then).
    WHERE q.status = 'processing'
      AND q.lease_at <= now() - make_interval(secs => least($1::float8, $3::float8, $4::float8))
      AND aiqueue_recover_at(q.lease_at, q.started_at, q.progress IS NOT NULL, NULL,
                             $1::float8, $3::float8, $4::float8) <= now()
      AND NOT ($5::boolean AND EXISTS (
          SELECT 1 FROM ai_marking_attempts a
          WHERE a.queue_id = q.queue_id AND a.dispatch_seq = q.dispatch_seq
            AND a.kind = 'dispatch' AND a.dispatch_ref IS NOT NULL))
      -- Each kind by its own platform's thresholds ($7 these kinds; NULL: all but $8).
      AND aiqueue_kind_in(q.kind, $7::text[], $8::text[])
    ORDER BY q.lease_at
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
        run_after = now(), lease_at = NULL, last_error = stuck.why, updated_at = now()
    FROM stuck WHERE q.queue_id = stuck.queue_id
    RETURNING q.queue_id, q.dispatch_seq, q.status, stuck.why
),
history AS (
    UPDATE ai_marking_attempts a SET ended_at = now(), outcome = 'stuck', error = row.why,
        platform = CASE WHEN row.why = 'platform_timeout' THEN 'timed_out' ELSE a.platform END
    FROM row WHERE a.queue_id = row.queue_id AND a.dispatch_seq = row.dispatch_seq
      AND a.kind = 'dispatch'
),
-- Completed rows still holding a slot for a newer dispatch that never reported.
released AS (
    UPDATE ai_marking_queue q SET lease_at = NULL
    WHERE q.status = 'completed' AND q.lease_at IS NOT NULL
      AND aiqueue_recover_at(q.lease_at, q.started_at, q.progress IS NOT NULL, NULL,
                             $1::float8, $3::float8, $4::float8) <= now()
),
tally AS (
    INSERT INTO ai_marking_tally (outcome, job, error, n)
    SELECT 'stuck', CASE WHEN row.status = 'failed' THEN 'failed' END, row.why, count(*)
    FROM row GROUP BY 2, 3
)
SELECT count(*) AS n FROM row;

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
    -- looked at once quiet for $11 (aiqueue/recovery.py: the heartbeat timeout
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

-- retry_failed --
-- Manual retry: a failed row starts over with fresh attempts and a fresh turn,
-- as an enqueue gives one (aiqueue_retry in functions.sql).
SELECT r.queue_id FROM aiqueue_retry(ARRAY[$1::uuid], $2::text) r;

-- retry_all_failed --
-- Retry every failed row (of one assignment when $1 is set) whose submission
-- has no live row already: the newest failed row of each submission.
SELECT count(*) AS n FROM aiqueue_retry(ARRAY(
    SELECT q.queue_id FROM ai_marking_queue q
    WHERE q.status = 'failed' AND ($1::text IS NULL OR q.assignment_id = $1)
      AND NOT EXISTS (SELECT 1 FROM ai_marking_queue o
                      WHERE o.submission_id = q.submission_id
                        AND o.status IN ('pending', 'processing'))
      AND q.queue_id = (SELECT l.queue_id FROM ai_marking_queue l
                        WHERE l.submission_id = q.submission_id AND l.status = 'failed'
                        ORDER BY l.created_at DESC LIMIT 1)
    ORDER BY q.seq), $2::text);

-- row_status --
SELECT status FROM ai_marking_queue WHERE queue_id = $1;

-- cancel_pending --
-- Pending rows become cancelled: the one row $1 names, or the rest of
-- assignment $2 (the caller passes exactly one of them; with both NULL no row
-- matches).
WITH row AS (
    UPDATE ai_marking_queue
    SET status = 'cancelled', finished_at = now(), updated_at = now()
    WHERE status = 'pending' AND (queue_id = $1::uuid OR assignment_id = $2::text)
    RETURNING queue_id, pool, priority, coalesce(group_key, assignment_id) AS group_key, turn
),
history AS (
    INSERT INTO ai_marking_attempts (queue_id, kind, outcome, ended_at, actor)
    SELECT queue_id, 'action', 'cancel', now(), $3 FROM row
),
-- A group whose last turns were cancelled continues where its live rows end,
-- not behind turns nobody will take (see enqueue).
regroup AS (
    UPDATE ai_marking_groups g SET last_turn = c.first_turn - 1, updated_at = now()
    FROM (SELECT pool, priority, group_key, min(turn) AS first_turn, max(turn) AS last_turn
          FROM row GROUP BY pool, priority, group_key) c
    WHERE g.pool = c.pool AND g.priority = c.priority AND g.group_key = c.group_key
      AND c.last_turn >= g.last_turn
)
SELECT count(*) AS n FROM row;

-- set_paused --
-- Pause is queue-wide: every pool's control row (aiqueue 0019).
UPDATE ai_queue_control
SET paused = $1, paused_by = CASE WHEN $1 THEN $2 END, paused_at = CASE WHEN $1 THEN now() END;

-- control --
-- The pause and pool $2's breaker and hold (default: the default pool).
SELECT c.paused, c.paused_by, c.paused_at, c.consecutive_failures, c.circuit_open_until,
       c.busy_until, aiqueue_circuit_state(c, $1::integer) AS circuit_state
FROM aiqueue_pool_control(coalesce($2::text, 'default')) c;

-- flow_state --
-- The flow control as it stands (aiqueue 0010): the limit the claim enforces
-- for cap $1 (0 = unlimited, before any refusal), the hold, the refusal
-- counters, and the budget window's use over $2 seconds.
-- Of pool $3 (aiqueue 0019; NULL: the default pool).
SELECT aiqueue_flow_cap(c, $1::integer) AS in_flight_limit,
       CASE WHEN c.busy_until > now() THEN c.busy_until END AS hold_until,
       c.refusals_rate_limited, c.refusals_overloaded, u.tokens AS tokens_in_window,
       u.requests AS requests_in_window
FROM aiqueue_pool_control(coalesce($3::text, 'default')) c,
     aiqueue_budget_use($2::float8, coalesce($3::text, 'default')) u;

-- stats --
-- Totals per status sum the deltas in ai_marking_counts (migration 0004): no
-- figure here counts the table.  "today" is the UTC day, an index range on
-- (status, finished_at); timings cover the last 24 h but at most the latest
-- 20,000 completions, an index-only scan of ai_marking_queue_completed_idx
-- (migration 0002), so the p95 sort stays bounded on a busy day.  Timings are
-- float8 (date_part), not numeric: the p95 sort is the dearest part.
-- $1: the moment the figures are for (NULL: now(); tests inject a clock).
WITH totals AS (
    SELECT status, sum(n)::bigint AS n FROM ai_marking_counts GROUP BY status
)
SELECT
    coalesce((SELECT n FROM totals WHERE status = 'pending'), 0) AS pending,
    coalesce((SELECT n FROM totals WHERE status = 'processing'), 0) AS processing,
    coalesce((SELECT n FROM totals WHERE status = 'completed'), 0) AS completed,
    coalesce((SELECT n FROM totals WHERE status = 'failed'), 0) AS failed,
    coalesce((SELECT n FROM totals WHERE status = 'cancelled'), 0) AS cancelled,
    coalesce((SELECT n FROM totals WHERE status = 'expired'), 0) AS expired,
    -- Pending rows whose not_before is still to come (§9d): not backlog yet.
    (SELECT count(*) FROM ai_marking_queue WHERE status = 'pending'
        AND not_before > coalesce($1::timestamptz, now())) AS scheduled,
    (SELECT count(*) FROM ai_marking_queue WHERE status = 'failed'
        AND finished_at >= date_trunc('day', coalesce($1::timestamptz, now()) AT TIME ZONE 'UTC')
                           AT TIME ZONE 'UTC')
        AS failed_today,
    (SELECT count(*) FROM ai_marking_queue WHERE status = 'completed'
        AND finished_at >= date_trunc('day', coalesce($1::timestamptz, now()) AT TIME ZONE 'UTC')
                           AT TIME ZONE 'UTC')
        AS completed_today,
    t.avg_seconds, t.p95_seconds,
    -- A scheduled row waits from its not_before on, and not at all before it (§9d).
    -- A batch-lane row waiting for a provider batch (its live time still to come,
    -- §9f) is no backlog either: it waits by design, up to its deadline.
    -- Two index probes: the oldest unscheduled row (status, created_at), and the
    -- earliest not_before that has come (ai_marking_queue_not_before_idx).
    date_part('epoch', coalesce($1::timestamptz, now()) - least(
        (SELECT created_at FROM ai_marking_queue
         WHERE status = 'pending' AND not_before IS NULL
           AND NOT (lane = 'batch' AND run_after > coalesce($1::timestamptz, now()))
         ORDER BY created_at LIMIT 1),
        (SELECT min(not_before) FROM ai_marking_queue
         WHERE status = 'pending' AND not_before <= coalesce($1::timestamptz, now())
           AND NOT (lane = 'batch' AND run_after > coalesce($1::timestamptz, now())))))
        AS oldest_pending_seconds
FROM (
    SELECT avg(d) AS avg_seconds,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY d) AS p95_seconds
    FROM (SELECT date_part('epoch', finished_at - started_at) AS d
          FROM ai_marking_queue
          WHERE status = 'completed'
            AND finished_at >= coalesce($1::timestamptz, now()) - interval '24 hours'
            AND started_at IS NOT NULL
          ORDER BY finished_at DESC
          LIMIT 20000) recent
) t;

-- list_rows --
-- Newest first; keyset paging via ($3, $4) = the last row of the previous page.
SELECT queue_id, submission_id, assignment_id, status, attempts, last_error,
       created_at, updated_at, started_at, finished_at, priority,
       coalesce(group_key, assignment_id) AS group_key, kind, pool, not_before, expires_at,
       -- A pending row of a group at a spend cap waits until then (aiqueue 0022).
       aiqueue_spend_resumes_at(status, pool, priority, coalesce(group_key, assignment_id))
           AS resumes_at
FROM ai_marking_queue
WHERE ($1::text IS NULL OR status = $1)
  AND ($2::text IS NULL OR assignment_id = $2)
  AND ($3::timestamptz IS NULL OR (created_at, queue_id) < ($3, $4::uuid))
  AND ($7::text IS NULL OR coalesce(group_key, assignment_id) = $7)
  AND ($8::text IS NULL OR kind = $8)
ORDER BY created_at DESC, queue_id DESC
LIMIT $5 OFFSET $6;

-- count_rows --
-- Without an assignment or group filter the total comes from the count deltas
-- (per kind too, $4); with one it counts those rows (an assignment's through
-- its index).
SELECT CASE WHEN $2::text IS NULL AND $3::text IS NULL THEN
           (SELECT coalesce(sum(n), 0) FROM ai_marking_counts
            WHERE ($1::text IS NULL OR status = $1) AND ($4::text IS NULL OR kind = $4))
       ELSE
           (SELECT count(*) FROM ai_marking_queue
            WHERE ($2::text IS NULL OR assignment_id = $2)
              AND ($3::text IS NULL OR coalesce(group_key, assignment_id) = $3)
              AND ($4::text IS NULL OR kind = $4)
              AND ($1::text IS NULL OR status = $1))
       END::bigint AS n;

-- attempts_of --
SELECT id, dispatch_seq, attempt, kind, started_at, ended_at, outcome, error, usage::text AS usage,
       actor, dispatch_ref, platform, ran_kind
FROM ai_marking_attempts WHERE queue_id = $1 ORDER BY id;

-- get_row --
SELECT queue_id, submission_id, assignment_id, status, attempts, last_error,
       created_at, updated_at, started_at, finished_at, priority,
       coalesce(group_key, assignment_id) AS group_key, kind, pool, not_before, expires_at,
       -- A pending row of a group at a spend cap waits until then (aiqueue 0022).
       aiqueue_spend_resumes_at(status, pool, priority, coalesce(group_key, assignment_id))
           AS resumes_at
FROM ai_marking_queue WHERE queue_id = $1;

-- ping --
SELECT 1 AS ok;

-- idempotency_claim --
-- Takes an Idempotency-Key for this transaction (or one expired after 24 h).
-- A concurrent request with the same key waits here on the unique index until
-- the first commits (then it finds the answer) or rolls back (then it takes it).
INSERT INTO ai_marking_idempotency AS i (key, body_hash) VALUES ($1, $2)
ON CONFLICT (key) DO UPDATE
SET body_hash = EXCLUDED.body_hash, answer = NULL, created_at = now()
WHERE i.created_at < now() - interval '24 hours'
RETURNING true AS fresh;

-- idempotency_answer --
SELECT body_hash, answer FROM ai_marking_idempotency WHERE key = $1;

-- idempotency_save --
UPDATE ai_marking_idempotency SET answer = $2 WHERE key = $1;

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

-- dry_run --
-- What an enqueue of these ids would do, writing nothing (CONTRACT §9c): how
-- many rows it would add (known, without a live row, not marked unless $3
-- remark) and how many are marked already; the unknown ids; what a row of the
-- assignment is expected to use (aiqueue_estimate) and cost in its pool ($5,
-- $6: the money plan); the group's and pool's spend in the windows that hold
-- now; and what runs ahead of it in the pool.
WITH ids AS MATERIALIZED (
    SELECT DISTINCT t.id FROM unnest($1::uuid[]) AS t (id)
),
subs AS MATERIALIZED (
    SELECT ids.id, s.id IS NOT NULL AS known, s.ai_marked_at IS NOT NULL AS marked,
           EXISTS (SELECT 1 FROM ai_marking_queue q
                   WHERE q.submission_id = ids.id AND q.status IN ('pending', 'processing'))
               AS live
    FROM ids LEFT JOIN submissions s ON s.id = ids.id
),
est AS (
    SELECT * FROM aiqueue_estimate($5::text, $2::text)
)
SELECT (SELECT count(*) FROM subs WHERE known AND NOT live AND (NOT marked OR $3::boolean))
           AS rows,
       (SELECT count(*) FROM subs WHERE known AND marked AND NOT $3::boolean) AS already_marked,
       (SELECT coalesce(array_agg(id), '{}') FROM subs WHERE NOT known) AS unknown_ids,
       est.prompt_tokens, est.completion_tokens, est.source,
       coalesce(est.cost_usd, aiqueue_price_usd($6::jsonb, $5::text, est.model,
                                                est.prompt_tokens, est.completion_tokens))
           AS row_cost_usd,
       aiqueue_batch_price_usd($6::jsonb, $5::text, est.model, est.prompt_tokens,
                               est.completion_tokens, est.cost_usd) AS batch_row_cost_usd,
       sp.group_hour, sp.group_day, sp.pool_day,
       (SELECT coalesce(sum(c.n), 0) FROM ai_marking_counts c
        WHERE c.status IN ('pending', 'processing'))::bigint AS ahead
FROM est, aiqueue_spend_now($6::jsonb -> $5::text, $5::text, $4::text) sp;

-- pool_states --
-- Each pool of the plan $1 as the stats show it (aiqueue 0019): its limit L,
-- its hold, its breaker ($2: the threshold), its refusals and its budget
-- window's use over $3 seconds, and its rows in flight.
SELECT x.name AS pool, aiqueue_flow_cap(c, x.cap) AS in_flight_limit,
       CASE WHEN c.busy_until > now() THEN c.busy_until END AS hold_until,
       aiqueue_circuit_state(c, $2::integer) AS circuit_state,
       c.consecutive_failures, c.refusals_rate_limited, c.refusals_overloaded,
       u.tokens AS tokens_in_window, u.requests AS requests_in_window,
       (SELECT count(*) FROM ai_marking_queue q
        WHERE q.pool = x.name AND q.lease_at IS NOT NULL) AS in_flight
FROM jsonb_to_recordset($1::jsonb -> 'pools') AS x (name text, cap integer)
     CROSS JOIN LATERAL aiqueue_pool_control(x.name) c
     CROSS JOIN LATERAL aiqueue_budget_use($3::float8, x.name) u
ORDER BY x.name;

-- kind_counts --
-- Rows per kind, pool and status, from the count deltas (aiqueue 0019).
SELECT kind, pool, status, sum(n)::bigint AS n
FROM ai_marking_counts
GROUP BY kind, pool, status
HAVING sum(n) <> 0
ORDER BY kind, pool, status;
