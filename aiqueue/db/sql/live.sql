-- Live events, queue position and run progress (aiqueue/reads/live.py, aiqueue/queue/progress.py).

-- live_events_head --
-- Where a new subscriber starts: every transaction below the snapshot's xmin has
-- finished, so its events are already reflected in anything read from now on;
-- events of transactions at or above it may still commit and are delivered.
SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS tx;

-- live_events_after --
-- The live-events cursor is (tx, id), not the identity id alone.  An id is taken
-- when the event row is inserted but becomes visible only at commit, so ids
-- commit out of order: a reader that has seen id 42 can later find id 41 (a
-- transaction that inserted first and committed last) and would skip it.
-- Instead an event is handed out only once its transaction is below the
-- snapshot's xmin: every such transaction has ended, so no event can ever again
-- appear at or below a (tx, id) we have passed, and ordering by (tx, id) is a
-- total order that never grows in the middle.  Events that are visible but not
-- yet below the horizon come back with final = false; the caller stops there and
-- looks again shortly (an older transaction, maybe of another app, is still open).
-- The cursor index (assignment_id, tx, id) from migration 0003 serves the scan.
-- An enqueue's rows share one feed row (migration 0009): the view spreads it out
-- and k, the row's place in it, is the cursor's third part ($4; 0 for a
-- single-row event).  (tx, id) >= ... is what the index scan can use; the
-- incremental sort on k then orders one feed row's events at a time.
-- A progress event gets its message from the row, only while the row is
-- still processing (the feed itself stores no message: see `heartbeat`).
SELECT e.tx::text AS tx, e.id, e.k, e.queue_id, e.submission_id, e.status,
       CASE WHEN e.summary ? 'progress' THEN
           jsonb_set(e.summary, '{progress,message}', coalesce((
               SELECT q.progress -> 'message' FROM ai_marking_queue q
               WHERE q.queue_id = e.queue_id AND q.status = 'processing'
                 AND jsonb_typeof(q.progress -> 'message') = 'string'), 'null'))
       ELSE e.summary END::text AS summary,
       e.tx < h.xmin AS final
FROM ai_marking_event_feed e,
     (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) h
WHERE e.assignment_id = $1
  AND (e.tx, e.id) >= ($2::text::xid8, $3::bigint)
  AND (e.tx, e.id, e.k) > ($2::text::xid8, $3::bigint, $4::bigint)
ORDER BY e.tx, e.id, e.k
LIMIT $5;

-- submission_status --
-- The submission's latest row and, when it is pending, how many pending rows the
-- claim takes before it: those ahead in claim order (-priority, turn, seq)
-- that are due no later than it is; while it waits out a backoff, every row of
-- its priority due before it as well, whatever its turn.  The priority range
-- is a range condition on the claim index, so the count reads only those rows.
WITH latest AS (
    SELECT queue_id, status, attempts, priority, turn, run_after, seq, started_at, progress,
           pool, coalesce(group_key, assignment_id) AS grp, not_before, lane, deadline,
           leader_id, held_run_after
    FROM ai_marking_queue
    WHERE submission_id = $1
    ORDER BY created_at DESC, seq DESC
    LIMIT 1
)
SELECT l.queue_id, l.status, l.attempts,
       -- Held for its run's calibration (docs/agreement.md): no place in line until released.
       l.status = 'pending' AND l.held_run_after IS NOT NULL AS held,
       CASE WHEN l.status = 'pending' AND l.held_run_after IS NULL THEN (
           SELECT count(*) FROM ai_marking_ready q
           WHERE -q.priority <= -l.priority
             AND (q.priority > l.priority
                  OR (q.priority = l.priority
                      AND ((q.turn, q.seq) < (l.turn, l.seq)
                           OR (l.run_after > now() AND q.queue_id <> l.queue_id))))
             AND q.run_after <= greatest(now(), l.run_after)
       ) END AS ahead,
       CASE WHEN l.status = 'processing'
            THEN extract(epoch FROM now() - l.started_at)::float8 END AS running_seconds,
       (SELECT count(*) FROM aiqueue_in_flight()) AS in_flight,
       (SELECT m.review FROM ai_marking_results m WHERE m.queue_id = l.queue_id) AS review,
       CASE WHEN l.status = 'processing' THEN l.progress::text END AS progress,
       -- Paused at a spend cap (aiqueue 0022): until when, and by which cap.
       p.until AS resumes_at, p.cap AS paused_by,
       -- Scheduled (docs/operating/alerts.md): not due before this moment.
       CASE WHEN l.status = 'pending' AND l.not_before > now() THEN l.not_before END
           AS scheduled_for,
       -- The overnight lane (docs/overnight.md): the row's lane and its deadline.
       l.lane, l.deadline,
       -- The same answer (aiqueue 0028): the row whose mark it will copy.
       CASE WHEN l.status = 'pending' THEN l.leader_id END AS same_answer_as
FROM latest l
LEFT JOIN LATERAL aiqueue_spend_pause(l.status, l.pool, l.priority, l.grp) p ON true;

-- recent_processing_seconds --
-- Average dispatch-to-result time of the last 50 completed live rows of kind $1
-- (NULL: of any kind) among the last 1,000 completed (read backwards on the
-- (phase, finished_at) index, so a kind with no recent mark costs no more than
-- one with many): the basis of every ETA.  NULL: no recent mark of the kind
-- (docs/concepts.md#an-estimate-first: its expected_seconds, else "time shown
-- after the first marks").
SELECT avg(d)::float8 AS seconds
FROM (SELECT last.d
      FROM (SELECT extract(epoch FROM finished_at - started_at) AS d, kind, lane
            FROM ai_marking_queue
            WHERE phase = 'completed' AND started_at IS NOT NULL AND finished_at IS NOT NULL
            ORDER BY finished_at DESC
            LIMIT 1000) last
      WHERE (last.kind = $1::text OR $1::text IS NULL) AND last.lane = 'live'
      LIMIT 50) recent;

-- run_progress --
-- Counts over the assignment's latest run (its newest row's run_id: an enqueue
-- joins the live run, so "Mark All" and then one more row is still one run),
-- plus the queue position of the run's last pending row, other runs included.
WITH run AS (
    SELECT run_id FROM ai_marking_queue
    WHERE assignment_id = $1
    ORDER BY created_at DESC, seq DESC
    LIMIT 1
),
rows AS MATERIALIZED (
    SELECT q.status, q.priority, q.turn, q.run_after, q.seq, q.started_at, q.pool,
           coalesce(q.group_key, q.assignment_id) AS grp, q.not_before, q.lane, q.deadline
    FROM ai_marking_queue q JOIN run ON q.run_id = run.run_id
    WHERE q.assignment_id = $1
),
last AS (
    SELECT priority, turn, run_after, seq, pool, grp FROM rows
    WHERE status = 'pending'
    ORDER BY priority, turn DESC, seq DESC
    LIMIT 1
)
SELECT (SELECT run_id FROM run) AS run_id,
       (SELECT count(*) FROM rows) AS total,
       (SELECT count(*) FROM rows WHERE status = 'pending') AS pending,
       (SELECT count(*) FROM rows WHERE status = 'processing') AS processing,
       (SELECT count(*) FROM rows WHERE status = 'completed') AS completed,
       (SELECT count(*) FROM rows WHERE status = 'failed') AS failed,
       (SELECT count(*) FROM rows WHERE status = 'cancelled') AS cancelled,
       (SELECT count(*) FROM rows WHERE status = 'expired') AS expired,
       -- Rows not due before their not_before, and the first such moment.
       (SELECT count(*) FROM rows WHERE status = 'pending' AND not_before > now())
           AS scheduled,
       (SELECT min(not_before) FROM rows WHERE status = 'pending' AND not_before > now())
           AS scheduled_for,
       -- Unfinished rows on the overnight lane (docs/overnight.md), and when the last is due.
       (SELECT count(*) FROM rows
        WHERE status IN ('pending', 'processing') AND lane = 'batch') AS batch,
       (SELECT max(deadline) FROM rows
        WHERE status IN ('pending', 'processing') AND lane = 'batch') AS deadline,
       CASE WHEN EXISTS (SELECT 1 FROM last) THEN (
           SELECT count(*) FROM ai_marking_ready q, last l
           WHERE -q.priority <= -l.priority
             AND (q.priority > l.priority
                  OR (q.priority = l.priority
                      AND ((q.turn, q.seq) <= (l.turn, l.seq) OR l.run_after > now())))
             AND q.run_after <= greatest(now(), l.run_after)
       ) END AS last_position,
       (SELECT extract(epoch FROM now() - max(started_at))::float8
        FROM rows WHERE status = 'processing') AS youngest_running_seconds,
       (SELECT count(*) FROM aiqueue_in_flight()) AS in_flight,
       -- The run's pending rows paused at a spend cap (aiqueue 0022).
       (SELECT p.until FROM last l, aiqueue_spend_pause('pending', l.pool, l.priority, l.grp) p)
           AS resumes_at,
       (SELECT p.cap FROM last l, aiqueue_spend_pause('pending', l.pool, l.priority, l.grp) p)
           AS paused_by,
       u.prompt_tokens, u.completion_tokens, u.cost_usd, u.unpriced_jobs, u.accepted,
       u.reverted, u.unreviewed
FROM (SELECT coalesce(sum(m.prompt_tokens), 0)::bigint AS prompt_tokens,
             coalesce(sum(m.completion_tokens), 0)::bigint AS completion_tokens,
             sum(m.cost_usd)::float8 AS cost_usd,
             count(*) FILTER (WHERE m.cost_usd IS NULL) AS unpriced_jobs,
             count(*) FILTER (WHERE m.review = 'accepted') AS accepted,
             count(*) FILTER (WHERE m.review = 'reverted') AS reverted,
             count(*) FILTER (WHERE m.review = 'unreviewed') AS unreviewed
      FROM ai_marking_results m WHERE m.run_id = (SELECT run_id FROM run)) u;

-- listening --
-- An instance LISTENs: triggers send NOTIFY for the next $1 seconds (the
-- listener says so again before then); without listeners they skip it.
UPDATE ai_queue_control
SET listened_until = greatest(listened_until, now() + make_interval(secs => $1::float8))
WHERE id = 1;
