-- Ordered fallback between kinds (docs/fallback-budgets-calendar.md).
--
-- While a kind's pool is down (its circuit open, or every call refused for the
-- kind's fallback_after_seconds; aiqueue/queue/fallback.py decides), its
-- pending live rows move to its fallback kind's pool: `pool` becomes that
-- pool and `run_kind` the fallback kind, and the claim's plan lists the kind
-- in that pool with the fallback's cap (`runs_as`, 10_plan.sql).  Everything
-- keyed on a row's pool (L, the hold, the breaker, the budgets, turns by
-- tokens, spend caps, what a result corrects) is then the fallback pool's,
-- and a kind's cap counts the rows it runs for another (aiqueue_kind_in_flight).
-- The row keeps its `kind`; its dispatch line records the kind that ran it.
-- Once its own pool takes work again, its pending rows move back.  A row
-- already on a fallback never moves on to the fallback's fallback.

-- `moves`: [{"kind", "home", "to", "as", "away"}], one per kind that has a
-- fallback: away (true) moves the kind's pending rows from its home pool to
-- `to` as `as`; home (false) moves those still on the fallback back.  Under
-- the claim's lock, so no claim sees a row half moved.  The rows' groups join
-- their turns in the pool they are in now.  Answers how many rows moved.
CREATE OR REPLACE FUNCTION aiqueue_fallback_move(moves jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    ids uuid[];
BEGIN
    IF moves IS NULL OR jsonb_array_length(moves) = 0 THEN
        RETURN 0;
    END IF;
    -- Only when some row would move: the lock is the claim's.
    IF NOT EXISTS (
        SELECT 1 FROM jsonb_to_recordset(moves) AS m (kind text, home text, "to" text,
                                                      "as" text, away boolean)
        JOIN ai_marking_ready r ON r.kind = m.kind
             AND r.pool = CASE WHEN m.away THEN m.home ELSE m."to" END
             AND (r.run_kind IS NULL) = m.away AND r.lane = 'live'
        JOIN ai_marking_queue_live q ON q.queue_id = r.queue_id AND q.status = 'pending'
             AND q.batch_id IS NULL)
    THEN
        RETURN 0;
    END IF;
    PERFORM aiqueue_claim_lock();
    WITH moved AS (
        UPDATE ai_marking_queue_live q
        SET pool = CASE WHEN m.away THEN m."to" ELSE m.home END,
            run_kind = CASE WHEN m.away THEN m."as" END, updated_at = now()
        FROM jsonb_to_recordset(moves) AS m (kind text, home text, "to" text, "as" text,
                                             away boolean)
        JOIN ai_marking_ready r ON r.kind = m.kind
             AND r.pool = CASE WHEN m.away THEN m.home ELSE m."to" END
             AND (r.run_kind IS NULL) = m.away AND r.lane = 'live'
        WHERE q.queue_id = r.queue_id AND q.status = 'pending' AND q.kind = m.kind
          AND q.pool = CASE WHEN m.away THEN m.home ELSE m."to" END
          AND (q.run_kind IS NULL) = m.away AND q.lane = 'live' AND q.batch_id IS NULL
        RETURNING q.queue_id
    )
    SELECT array_agg(queue_id) INTO ids FROM moved;
    PERFORM aiqueue_fair_join_ids(ids);
    RETURN coalesce(cardinality(ids), 0);
END
$$;
