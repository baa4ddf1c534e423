-- Asking the platform before recovering a row (CONTRACT §8e, aiqueue/recovery.py).
-- The HTTP call to the platform runs between these statements, never inside a
-- transaction: each statement here is short and decides on what it finds.

-- recovery_lookups --
-- Up to $4 dispatches whose time to ask has come (aiqueue_recover_at with the
-- platform's look threshold $1 = $2 and its bound $3), each taken for $5
-- seconds: another instance skips it meanwhile (SKIP LOCKED now, look_after
-- after the commit).  Only rows of the kinds that dispatch to this platform
-- ($6 these kinds; NULL: every kind but $7).  `past_bound`: the platform's time limit and grace have
-- run out by the database's clock, so "not found" now means gone.
WITH due AS (
    SELECT a.id
    FROM ai_marking_queue q
    JOIN ai_marking_attempts a ON a.queue_id = q.queue_id AND a.dispatch_seq = q.dispatch_seq
         AND a.kind = 'dispatch'
    WHERE q.status = 'processing' AND q.lease_at IS NOT NULL AND a.dispatch_ref IS NOT NULL
      AND aiqueue_recover_at(q.lease_at, q.started_at, q.progress IS NOT NULL, a.look_after,
                             $1::float8, $2::float8, $3::float8) <= now()
      AND aiqueue_kind_in(q.kind, $6::text[], $7::text[])
    ORDER BY q.lease_at
    LIMIT $4
    FOR UPDATE OF a SKIP LOCKED
)
UPDATE ai_marking_attempts a SET look_after = now() + make_interval(secs => $5::float8)
FROM due, ai_marking_queue q
WHERE a.id = due.id AND q.queue_id = a.queue_id
RETURNING a.queue_id, a.dispatch_seq, a.attempt, a.dispatch_ref,
          q.started_at + make_interval(secs => $3::float8) <= now() AS past_bound;

-- recovery_note --
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

-- recovery_said --
-- The platform's word on a dispatch that just ended (applied from the
-- activation, activation failed, timed out): kept on its history line.
UPDATE ai_marking_attempts SET platform = $3, look_after = NULL
WHERE queue_id = $1 AND dispatch_seq = $2 AND kind = 'dispatch';

-- recent_processing_tail --
-- The recent p95 processing time (dispatch to result, seconds): the last
-- hour's results, the newest 200 at most (the BRIN index on applied_at keeps
-- this a short range scan); NULL with fewer than 5, when it says little.
SELECT CASE WHEN count(*) >= 5
            THEN percentile_cont(0.95) WITHIN GROUP (ORDER BY r.processing_seconds) END
FROM (SELECT processing_seconds FROM ai_marking_results
      WHERE applied_at > now() - interval '1 hour' AND processing_seconds IS NOT NULL
      ORDER BY applied_at DESC LIMIT 200) r;
