-- Watching the overnight lane: the fallback's figures (a batch's unresolved rows and the
-- pool's live backlog and L), when the next look is due, and what the Batches card of
-- /ai-queue and /metrics show (ids, counts, states and times only).

-- batch_pending --
-- A batch's unresolved rows and their nearest deadline (the fallback's figures).
SELECT count(*) AS n, min(deadline) AS deadline
FROM ai_marking_queue WHERE batch_id = $1 AND status = 'processing';

-- batch_backlog --
-- The live rows waiting in pool $1 (a batch's rows that go live queue behind
-- them) and its learned in-flight limit L (NULL: at its cap).
SELECT (SELECT count(*) FROM ai_marking_ready
        WHERE pool = $1 AND (lane = 'live' OR run_after <= now()))
           AS backlog,
       (SELECT in_flight_limit FROM ai_queue_control WHERE pool = $1) AS learned;

-- batch_next_look --
-- Seconds until the next look at any open batch is due (NULL: none open).  A
-- record still 'submitting' is reconciled on the lane's own cadence.
SELECT date_part('epoch', min(look_after) - now())
FROM ai_marking_batches
WHERE state IN ('submitted', 'cancelling', 'ended', 'clearing');

-- batch_orphans --
-- The accounts of open batches whose pool no longer declares a batch API ($1: the
-- pools that do): each is still polled, applied or cancelled, and deleted there,
-- with where it lives and the variable holding its key as recorded when it was
-- packed (NULL for a batch packed before they were recorded).
SELECT pool, provider, min(model) AS model, base_url, key_env, count(*) AS batches
FROM ai_marking_batches
WHERE state NOT IN ('done', 'abandoned') AND pool <> ALL ($1::text[])
GROUP BY pool, provider, base_url, key_env
ORDER BY pool, provider;

-- batches_open --
-- The Batches card of /ai-queue: each batch the provider may still keep
-- something of, with its rows still unresolved and their nearest deadline
-- (ids, counts and times only).
SELECT b.id, b.pool, b.provider, b.state, b.rows, b.created_at, b.error,
       p.unresolved, p.deadline
FROM ai_marking_batches b
CROSS JOIN LATERAL (SELECT count(*) AS unresolved, min(q.deadline) AS deadline
                    FROM ai_marking_queue q
                    WHERE q.batch_id = b.id AND q.status = 'processing') p
WHERE b.state NOT IN ('done', 'abandoned')
ORDER BY b.id
LIMIT $1;

-- batch_gauges --
-- /metrics: the batch lane's rows per pool and state (a row waiting for a
-- batch: 'waiting'; one in a batch: its batch's state), and the batches open
-- per pool.
SELECT 'rows' AS what, q.pool, coalesce(b.state, 'waiting') AS state, count(*) AS n
FROM (SELECT q.pool, q.batch_id FROM ai_marking_queue q
      WHERE q.status = 'processing' AND q.batch_id IS NOT NULL
      UNION ALL
      SELECT r.pool, NULL FROM ai_marking_ready r WHERE r.lane = 'batch') q
LEFT JOIN ai_marking_batches b ON b.id = q.batch_id
GROUP BY 2, 3
UNION ALL
SELECT 'batches', pool, '', count(*) FROM ai_marking_batches
WHERE state NOT IN ('done', 'abandoned')
GROUP BY pool;

-- batch_live_seconds --
-- The recent live processing time of one row (dispatch to result), for the
-- fallback's estimate; NULL when nothing was marked live lately.
SELECT avg(date_part('epoch', a.ended_at - a.started_at))
FROM (SELECT started_at, ended_at FROM ai_marking_attempts
      WHERE outcome = 'completed' AND kind = 'dispatch' AND ended_at IS NOT NULL
        AND (dispatch_ref IS NULL OR dispatch_ref NOT LIKE 'batch:%')
      ORDER BY id DESC LIMIT 200) a;

-- batch_open_count --
-- What the provider may still keep of this app's: batches not done.
SELECT count(*) FROM ai_marking_batches WHERE state NOT IN ('done', 'abandoned');
