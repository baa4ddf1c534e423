-- Ordered fallback between kinds (CONTRACT §10e).  The rule: aiqueue/queue/fallback.py.
-- Functions: functions/65_fallback.sql.  Gateway: aiqueue/db/fallback.py.

-- pools_down --
-- Whether pools $1 are down: the circuit open, held by a refusal, and for how
-- many seconds every call has been refused (NULL: the last one was taken).
SELECT c.pool, coalesce(c.circuit_open_until > now(), false) AS circuit_open,
       coalesce(c.busy_until > now(), false) AS held,
       date_part('epoch', now() - c.refused_since) AS refusing_seconds
FROM ai_queue_control c WHERE c.pool = ANY ($1::text[]);

-- fallback_move --
-- Move the pending rows of kinds that fell back, or came home (aiqueue_fallback_move).
SELECT aiqueue_fallback_move($1::jsonb) AS moved;
