-- Rows as operators and readers see them (aiqueue/db/rows.py): retry, cancel,
-- pause, the control row, flow state, stats and the row list.
-- Values only ever travel as $n parameters (as in every sql/*.sql file).

-- retry_failed --
-- Manual retry: a failed row starts over with fresh attempts and a fresh turn,
-- as an enqueue gives one (aiqueue_retry in functions/95_recovery.sql).
SELECT r.queue_id FROM aiqueue_retry(ARRAY[$1::uuid], $2::text) r;

-- retry_all_failed --
-- Retry every failed row (of one assignment when $1 is set) whose submission
-- has no live row already: the newest failed row of each submission.
SELECT count(*) AS n FROM aiqueue_retry(ARRAY(
    SELECT q.queue_id FROM ai_marking_queue q
    WHERE q.phase = 'failed' AND ($1::text IS NULL OR q.assignment_id = $1)
      AND NOT EXISTS (SELECT 1 FROM ai_marking_queue o
                      WHERE o.submission_id = q.submission_id
                        AND o.phase = 'live')
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
    SET status = 'cancelled', finished_at = now(), updated_at = now(),
        queue_moves = ai_marking_queue.queue_moves + 1
    WHERE status = 'pending' AND (queue_id = $1::uuid OR assignment_id = $2::text)
    RETURNING queue_id, pool, priority, coalesce(group_key, assignment_id) AS group_key, turn,
              ai_marking_queue AS moved
),
-- What follows the move (functions/74_moved.sql).
followed AS (
    SELECT aiqueue_moved(array_agg(row.moved), array_fill('pending'::text, ARRAY[count(*)::int]))
    FROM row
),
history AS (
    INSERT INTO ai_marking_attempts (queue_id, kind, outcome, ended_at, actor)
    SELECT queue_id, 'action', 'cancel', now(), $3 FROM row
),
-- A group whose last turns were cancelled continues where its live rows end
-- (40_fair.sql); one row, joined below so that it runs.
regroup AS (
    SELECT aiqueue_turns_cancelled(array_agg(pool), array_agg(priority),
                                   array_agg(group_key), array_agg(turn))
    FROM row
)
SELECT count(*) AS n FROM row CROSS JOIN regroup CROSS JOIN followed;

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
-- figure here counts the table.  "today" is the school's day (QUEUE_TIMEZONE,
-- $2, e.g. 'Europe/Berlin'; a day that began at its midnight), an index range on
-- (phase, finished_at); timings cover the last 24 h but at most the latest
-- 20,000 completions, a range of ai_marking_queue_finished_idx (phase,
-- finished_at; started_at is not in it, a claim changes it: docs/architecture.md),
-- so the p95 sort stays bounded on a busy day.  Timings are float8 (date_part), not numeric: the p95 sort is the
-- dearest part.
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
    -- Pending rows whose not_before is still to come (docs/operating/alerts.md): not backlog yet.
    (SELECT count(*) FROM ai_marking_ready
     WHERE not_before > coalesce($1::timestamptz, now())) AS scheduled,
    (SELECT count(*) FROM ai_marking_queue WHERE phase = 'failed'
        AND finished_at >= date_trunc('day', coalesce($1::timestamptz, now()) AT TIME ZONE $2::text)
                           AT TIME ZONE $2::text)
        AS failed_today,
    (SELECT count(*) FROM ai_marking_queue WHERE phase = 'completed'
        AND finished_at >= date_trunc('day', coalesce($1::timestamptz, now()) AT TIME ZONE $2::text)
                           AT TIME ZONE $2::text)
        AS completed_today,
    t.avg_seconds, t.p95_seconds,
    -- A scheduled row waits from its not_before on, and not at all before it.
    -- A batch-lane row waiting for a provider batch (its live time still to come,
    -- docs/overnight.md) is no backlog either: it waits by design, up to its deadline; nor is a
    -- row held for its run's calibration (docs/agreement.md), until it is released.
    -- Two index probes: the oldest unscheduled row (the list index's live rows),
    -- and the earliest not_before that has come (ai_marking_ready_not_before_idx).
    date_part('epoch', coalesce($1::timestamptz, now()) - least(
        (SELECT created_at FROM ai_marking_queue
         WHERE phase = 'live' AND status = 'pending' AND not_before IS NULL
           AND held_run_after IS NULL
           AND NOT (lane = 'batch' AND run_after > coalesce($1::timestamptz, now()))
         ORDER BY created_at LIMIT 1),
        (SELECT min(r.not_before)
         FROM ai_marking_ready r JOIN ai_marking_queue q ON q.queue_id = r.queue_id
         WHERE r.not_before <= coalesce($1::timestamptz, now()) AND q.held_run_after IS NULL
           AND NOT (r.lane = 'batch' AND r.run_after > coalesce($1::timestamptz, now())))))
        AS oldest_pending_seconds
FROM (
    SELECT avg(d) AS avg_seconds,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY d) AS p95_seconds
    FROM (SELECT date_part('epoch', finished_at - started_at) AS d
          FROM ai_marking_queue
          WHERE phase = 'completed'
            AND finished_at >= coalesce($1::timestamptz, now()) - interval '24 hours'
            AND started_at IS NOT NULL
          ORDER BY finished_at DESC
          LIMIT 20000) recent
) t;

-- list_rows --
-- Newest first; keyset paging via ($3, $4) = the last row of the previous page.
-- The rows: aiqueue_page_older (functions/82_rows.sql: each state through its
-- own index); the columns: aiqueue_rows, as get_row's.
SELECT r.*
FROM aiqueue_page_older($1::text, $2::text, $7::text, $8::text, $3::timestamptz, $4::uuid,
                        $5::bigint + $6::bigint) p
JOIN aiqueue_rows() r ON r.queue_id = p.queue_id
ORDER BY r.created_at DESC, r.queue_id DESC
LIMIT $5 OFFSET $6;

-- count_rows --
-- Without an assignment or group filter the total comes from the count deltas
-- (per kind too, $4); with one it counts those rows through the assignment's or
-- the group's list index (migration 0072), a status by its phase's range: an
-- ended status is its phase, so only a live one reads the rows' own status.
SELECT CASE WHEN $2::text IS NULL AND $3::text IS NULL THEN
           (SELECT coalesce(sum(n), 0) FROM ai_marking_counts
            WHERE ($1::text IS NULL OR status = $1) AND ($4::text IS NULL OR kind = $4))
       ELSE
           (SELECT count(*) FROM ai_marking_queue
            WHERE ($2::text IS NULL OR assignment_id = $2)
              AND ($3::text IS NULL OR coalesce(group_key, assignment_id) = $3)
              AND ($4::text IS NULL OR kind = $4)
              AND ($1::text IS NULL
                   OR phase = CASE WHEN $1 IN ('pending', 'processing') THEN 'live' ELSE $1 END)
              AND ($1::text IS NULL OR $1 NOT IN ('pending', 'processing') OR status = $1))
       END::bigint AS n;

-- attempts_of --
SELECT id, dispatch_seq, attempt, kind, started_at, ended_at, outcome, error, usage::text AS usage,
       actor, dispatch_ref, platform, ran_kind, note
FROM ai_marking_attempts WHERE queue_id = $1 ORDER BY id;

-- get_row --
SELECT * FROM aiqueue_rows() r WHERE r.queue_id = $1;

-- ping --
SELECT 1 AS ok;

-- pool_states --
-- Each pool of the plan $1 as the stats show it (aiqueue 0019): its limit L,
-- its hold, its breaker ($2: the threshold), its refusals and its budget
-- window's use over $3 seconds, and its rows in flight.
SELECT x.name AS pool, aiqueue_flow_cap(c, x.cap) AS in_flight_limit,
       CASE WHEN c.busy_until > now() THEN c.busy_until END AS hold_until,
       aiqueue_circuit_state(c, $2::integer) AS circuit_state,
       c.consecutive_failures, c.refusals_rate_limited, c.refusals_overloaded,
       u.tokens AS tokens_in_window, u.requests AS requests_in_window,
       (SELECT count(*) FROM ai_marking_claimed c WHERE c.pool = x.name) AS in_flight
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
