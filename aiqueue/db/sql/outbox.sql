-- Notifications (docs/integrating.md): the outbox's delivery bookkeeping.  The rows
-- themselves are written by the moves that end a row (aiqueue_outbox_moved,
-- functions/90_outbox.sql).

-- claim_deliveries --
-- Up to $1 due events for this delivery step.  SKIP LOCKED: two instances never
-- take the same event; the claim moves next_at past the attempt's lease ($2 s,
-- longer than the HTTP timeout), so while one instance is sending, no other
-- sends that attempt, and if it dies mid-delivery (kill -9, a frozen
-- invocation) the event is due again when the lease runs out.  `attempts`
-- numbers the claim: only that claim may record a failure.
WITH due AS (
    SELECT id FROM ai_marking_outbox
    WHERE state = 'waiting' AND next_at <= now()
    ORDER BY next_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE ai_marking_outbox o
SET attempts = o.attempts + 1, next_at = now() + make_interval(secs => $2::float8)
FROM due WHERE o.id = due.id
RETURNING o.id, o.type, o.body::text AS body, o.attempts, o.created_at;

-- delivery_succeeded --
-- A 2xx: done, whichever claim sent it (a late success still counts).
UPDATE ai_marking_outbox
SET state = 'delivered', last_outcome = $2, last_at = now(), ended_at = now()
WHERE id = $1 AND state = 'waiting'
RETURNING state;

-- delivery_failed --
-- A failed attempt of claim $2: due again after $4 s, but no later than the end
-- of the retry window ($5 s after the event was written, so the last try comes
-- at its end); given up once that window has passed, or at once on a 410 ($6).
-- A newer claim of the same event (this one outlived its lease) is left alone.
UPDATE ai_marking_outbox
SET state = CASE WHEN $6::boolean OR created_at + make_interval(secs => $5::float8) <= now()
                 THEN 'gave_up' ELSE 'waiting' END,
    ended_at = CASE WHEN $6::boolean OR created_at + make_interval(secs => $5::float8) <= now()
                    THEN now() END,
    next_at = least(now() + make_interval(secs => $4::float8),
                    created_at + make_interval(secs => $5::float8)),
    last_outcome = $3, last_at = now()
WHERE id = $1 AND attempts = $2 AND state = 'waiting'
RETURNING state;

-- prune_outbox --
-- Bounded, by age: delivered and given-up events after $1 s (QUEUE_PRUNE_AFTER_DAYS);
-- events still waiting once that time has passed after the retry window ($2 s):
-- no instance could deliver them (QUEUE_NOTIFY_URL unset), so nobody will.
DELETE FROM ai_marking_outbox
WHERE id IN (
    SELECT id FROM ai_marking_outbox
    WHERE created_at < now() - make_interval(secs => $1::float8)
      AND (state <> 'waiting'
           OR created_at < now() - make_interval(secs => $1::float8 + $2::float8))
    LIMIT 1000)
RETURNING 1;

-- next_delivery_due --
-- Seconds until the next waiting event is due (negative: overdue; NULL: none).
SELECT extract(epoch FROM min(next_at) - now())::float8 AS seconds
FROM ai_marking_outbox WHERE state = 'waiting';

-- outbox_entries --
-- The /ai-queue panel: events waiting or given up, newest first (no body).
SELECT id, type, assignment_id, queue_id, state, attempts, created_at, next_at,
       last_outcome, last_at,
       count(*) OVER (PARTITION BY state) AS of_state
FROM ai_marking_outbox
WHERE state IN ('waiting', 'gave_up')
ORDER BY created_at DESC, id
LIMIT $1;
