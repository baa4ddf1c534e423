-- Ordered fallback between kinds.  The rule: aiqueue/queue/fallback.py.
-- Functions: functions/65_fallback.sql.  Gateway: aiqueue/db/fallback.py.

-- pools_down --
-- Whether pools $1 are down: the circuit open, how many seconds ago the last
-- refusal's hold ended (negative while it lasts; NULL: never held), and for
-- how many seconds every call has been refused (NULL: a result came since).
SELECT c.pool, coalesce(c.circuit_open_until > now(), false) AS circuit_open,
       date_part('epoch', now() - c.busy_until) AS hold_ended,
       date_part('epoch', now() - c.refused_since) AS refusing_seconds
FROM ai_queue_control c WHERE c.pool = ANY ($1::text[]);

-- fallback_move --
-- Move the pending rows of kinds that fell back, or came home (aiqueue_fallback_move).
SELECT aiqueue_fallback_move($1::jsonb) AS moved;
