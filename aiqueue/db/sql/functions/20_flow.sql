-- Flow control for a shared paid model: the learned limit L and a refusal.
-- (The declared budget's window: 21_budget.sql.)
--
-- The learned in-flight limit L lives on each pool's control row (NULL: at the
-- ceiling).  Its rule is written here once, as two pure functions, and
-- aiqueue/flow.py holds the same rule in Python as the documented spec;
-- tests/integration/test_flow.py runs one table of cases through both.
--
-- The ceiling: the pool's max_in_flight (QUEUE_MAX_IN_FLIGHT for the default
-- pool), or 64 when that is 0 (unlimited).  With the cap at 0 the pool stays
-- unlimited until the model first refuses; L then

-- lives in 1..64 and becomes unlimited again once it climbs back to 64.

CREATE OR REPLACE FUNCTION aiqueue_flow_ceiling(cap integer) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN cap > 0 THEN cap ELSE 64 END
$$;

-- The cap the claim enforces: the configured one, or L while L is set.
CREATE OR REPLACE FUNCTION aiqueue_flow_cap(ctl ai_queue_control, cap integer) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN ctl.in_flight_limit IS NULL THEN cap
                ELSE least(ctl.in_flight_limit, aiqueue_flow_ceiling(cap)) END
$$;

-- Multiplicative decrease: a refusal halves L, counted from what was really in
-- flight (L may be far above it), never below 1.  A refusal of a dispatch sent
-- before the last cut (same_burst) was already answered by that cut.
CREATE OR REPLACE FUNCTION aiqueue_flow_after_refusal(lim integer, ceiling integer,
                                                      in_flight bigint, same_burst boolean)
RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN same_burst THEN lim
                ELSE greatest(1, least(coalesce(lim, ceiling), ceiling,
                                       greatest(in_flight, 1)::integer) / 2) END
$$;

-- Additive increase: after L results without a refusal, L + 1; back at the
-- ceiling L is cleared (NULL), which keeps the hot path write-free.  `paced`:
-- L was cut or raised less than the model's learned window ago, so it waits
-- (the results still count: the first one after the window raises it).
CREATE OR REPLACE FUNCTION aiqueue_flow_after_result(lim integer, clean integer,
                                                     ceiling integer, paced boolean,
                                                     OUT new_limit integer, OUT new_clean integer)
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN lim IS NULL THEN NULL
                WHEN clean + 1 < lim OR paced THEN lim
                WHEN lim + 1 >= ceiling THEN NULL
                ELSE lim + 1 END,
           CASE WHEN lim IS NULL THEN 0
                WHEN clean + 1 < lim THEN clean + 1
                WHEN paced THEN lim - 1
                ELSE 0 END
$$;

-- Whether a pool's L waits before it climbs: it was cut or raised less than
-- the model's learned window ago (NULL window: never learned, never waits).
CREATE OR REPLACE FUNCTION aiqueue_flow_paced(ctl ai_queue_control) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(greatest(ctl.limit_cut_at, ctl.limit_raised_at)
                    > now() - make_interval(secs => ctl.learned_window), false)
$$;

-- A refusal cuts its pool's L (aiqueue_flow_after_refusal), once per burst, and
-- holds the pool for `delay`; it counts the refusal and learns the model's
-- window (`learned`).
CREATE OR REPLACE FUNCTION aiqueue_flow_cut(p_pool text, p_started_at timestamptz, p_kind text,
                                            delay float8, cap integer, learned float8)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    ctl ai_queue_control%ROWTYPE;
    same_burst boolean;
BEGIN
    -- The pool's control row lock orders concurrent refusals: the second of a
    -- burst sees the first one's cut.  (The claim that dispatched the row made it.)
    SELECT * INTO ctl FROM ai_queue_control c WHERE c.pool = p_pool FOR UPDATE;
    same_burst := ctl.limit_cut_at IS NOT NULL AND p_started_at < ctl.limit_cut_at;
    UPDATE ai_queue_control c
    SET in_flight_limit = aiqueue_flow_after_refusal(
            c.in_flight_limit, aiqueue_flow_ceiling(cap),
            aiqueue_pool_in_flight(p_pool, aiqueue_flow_ceiling(cap)), same_burst),
        limit_clean = CASE WHEN same_burst THEN c.limit_clean ELSE 0 END,
        limit_cut_at = CASE WHEN same_burst THEN c.limit_cut_at ELSE now() END,
        learned_window = coalesce(learned, c.learned_window),
        busy_until = greatest(coalesce(c.busy_until, now()),
                              now() + make_interval(secs => delay)),
        refusals_rate_limited = c.refusals_rate_limited + (p_kind = 'rate_limited')::int,
        refusals_overloaded = c.refusals_overloaded + (p_kind = 'overloaded')::int,
        -- Since when every call of the pool was refused (a fallback's clock).
        refused_since = coalesce(c.refused_since, now())
    WHERE c.pool = p_pool;
END
$$;

-- A refusal (a `rate_limited`/`overloaded` item, or a dispatch answered
-- 429/503) of a row's current dispatch: the row goes back to pending without
-- using an attempt, due after `delay`; every dispatch of the row's pool — and
-- of no other pool — is held as long (busy_until); the pool's L is cut once per
-- burst; the refused call used none of the budget's tokens (it still counts as
-- a request).  A row first refused more than `give_up` seconds ago ends failed
-- with last_error = rate_limited.  The row's new status, or NULL when that
-- dispatch is no longer its current one.  `cap`: the default pool's, for a
-- call without a plan.  `learned`: the model's window as this refusal tells it
-- (its retry_after, or the reset of its whole budget), NULL: it tells none.
CREATE OR REPLACE FUNCTION aiqueue_flow_refused(p_queue_id uuid, p_dispatch_seq integer,
                                                p_kind text, delay float8, give_up float8,
                                                cap integer, plan jsonb DEFAULT NULL,
                                                learned float8 DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r ai_marking_queue%ROWTYPE;
    moved ai_marking_queue;
    gone boolean;
    outcome text;
BEGIN
    SELECT * INTO r FROM ai_marking_queue_live q
    WHERE q.queue_id = p_queue_id AND q.status = 'processing' AND q.dispatch_seq = p_dispatch_seq
    FOR UPDATE;
    IF NOT FOUND THEN
        -- A late result completed the row while this dispatch was refused: the
        -- slot it held is free now (see aiqueue_complete).
        PERFORM aiqueue_late_slot_free(p_queue_id, p_dispatch_seq);
        RETURN NULL;
    END IF;
    -- What the claim wrote is given back under its lock, taken before any other
    -- row: the dispatch's budget entry (its window's second, 21_budget.sql) and
    -- its spend windows (aiqueue_money_refund).  A claim's holder waits for no
    -- row this holds (the pool's control row, the group's turn), so no cycle.
    IF r.charged_usd IS NOT NULL
       OR EXISTS (SELECT 1 FROM ai_marking_budget b
                  WHERE b.queue_id = p_queue_id AND b.dispatch_seq = p_dispatch_seq) THEN
        PERFORM aiqueue_claim_lock();
    END IF;
    cap := coalesce((aiqueue_plan_pool(plan, r.pool)).cap, cap);
    PERFORM aiqueue_flow_cut(r.pool, r.started_at, p_kind, delay, cap, learned);
    gone := r.refused_since IS NOT NULL
            AND r.refused_since < now() - make_interval(secs => give_up);
    outcome := CASE WHEN gone THEN 'failed' ELSE 'pending' END;
    UPDATE ai_marking_queue q
    SET status = outcome, attempts = q.attempts - 1,
        run_after = now() + make_interval(secs => delay),
        started_at = NULL, updated_at = now(), queue_moves = q.queue_moves + 1,
        finished_at = CASE WHEN gone THEN now() END,
        last_error = CASE WHEN gone THEN 'rate_limited' ELSE p_kind END,
        refused_since = coalesce(q.refused_since, now())
    WHERE q.queue_id = p_queue_id
      AND q.status IN ('pending', 'processing')  -- the live part alone (aiqueue 0078)
    RETURNING q.* INTO moved;
    -- What follows the move (74_moved.sql): back to pending, or failed.
    PERFORM aiqueue_moved(ARRAY[moved], ARRAY['processing'], ARRAY[r.run_after]);
    DELETE FROM ai_marking_claimed c WHERE c.queue_id = p_queue_id;
    -- An attempt starts after its row was created: only the months since are
    -- looked at (the attempts are month partitions, 97_partitions.sql).
    UPDATE ai_marking_attempts a SET ended_at = now(), outcome = 'refused', error = p_kind
    WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq AND a.kind = 'dispatch'
      AND a.started_at >= aiqueue_months_from(r.created_at);
    UPDATE ai_marking_budget b SET tokens = 0
    WHERE b.queue_id = p_queue_id AND b.dispatch_seq = p_dispatch_seq;
    PERFORM aiqueue_money_refund(p_queue_id);
    INSERT INTO ai_marking_tally (outcome, job, error)
    VALUES ('refused', CASE WHEN gone THEN 'failed' END, CASE WHEN gone THEN 'rate_limited'
                                                              ELSE p_kind END);
    RETURN outcome;
END
$$;

-- A failed attempt of a row's current dispatch (a dispatch error, a failed
-- callback, a bad sync answer; the `attempt_failed` query): back to pending
-- after `p_delay`, or failed when its attempts are used up (a kind may allow
-- its own number: `p_attempts` {kind: n}, else `p_max_attempts`) or the
-- failure is final (not `p_retryable`).  The row's new status, or NULL when
-- that dispatch is no longer its current one.  The dispatch's slot is free either way: the
-- row's, or the one it held when a late result completed the row meanwhile.
--
-- A processing row is in the live part: each statement here names it with the
-- live part's key written out, or by the row's own month (its attempts), so a
-- failed attempt locks no month of ended rows; only the slot of a row a late
-- result completed is looked for there (aiqueue_late_slot_free, 36_slots).
CREATE OR REPLACE FUNCTION aiqueue_attempt_failed(p_queue_id uuid, p_dispatch_seq integer,
                                                  p_delay float8, p_retryable boolean,
                                                  p_max_attempts integer, p_error text,
                                                  p_outcome text, p_attempts jsonb)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    moved ai_marking_queue;
BEGIN
    UPDATE ai_marking_queue q
    SET status = CASE WHEN p_retryable
                            AND q.attempts < coalesce((p_attempts ->> q.kind)::integer,
                                                      p_max_attempts)
                      THEN 'pending' ELSE 'failed' END,
        run_after = now() + make_interval(secs => p_delay),
        finished_at = CASE WHEN p_retryable
                                 AND q.attempts < coalesce((p_attempts ->> q.kind)::integer,
                                                           p_max_attempts)
                           THEN NULL ELSE now() END,
        last_error = p_error, updated_at = now(), queue_moves = q.queue_moves + 1
    -- status = 'processing' alone prunes the plan to the live part (aiqueue 0078).
    WHERE q.queue_id = p_queue_id AND q.status = 'processing' AND q.dispatch_seq = p_dispatch_seq
    RETURNING q.* INTO moved;
    IF NOT FOUND THEN
        -- Nothing to fail; a slot this dispatch still holds is free now.
        DELETE FROM ai_marking_claimed c USING ai_marking_queue_live q
        WHERE c.queue_id = p_queue_id AND c.dispatch_seq = p_dispatch_seq
          AND q.queue_id = c.queue_id AND q.status = 'processing';
        IF NOT FOUND THEN
            PERFORM aiqueue_late_slot_free(p_queue_id, p_dispatch_seq);
        END IF;
        RETURN NULL;
    END IF;
    -- What follows the move (74_moved.sql): back to pending or failed.  A
    -- dispatched row went live when it was claimed (its run_after had come).
    PERFORM aiqueue_moved(ARRAY[moved], ARRAY['processing'], ARRAY[now()]);
    -- An attempt starts after its row was created: only the months since are
    -- looked at (the attempts are month partitions, 97_partitions.sql).
    UPDATE ai_marking_attempts a SET ended_at = now(), outcome = p_outcome, error = p_error
    WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq AND a.kind = 'dispatch'
      AND a.started_at >= aiqueue_months_from(moved.created_at);
    DELETE FROM ai_marking_claimed c
    WHERE c.queue_id = p_queue_id AND c.dispatch_seq = p_dispatch_seq;
    -- The /metrics counters (migration 0008): one delta per ended attempt.
    INSERT INTO ai_marking_tally (outcome, job, error)
    VALUES (p_outcome, CASE WHEN moved.status = 'failed' THEN 'failed' END, p_error);
    RETURN moved.status;
END
$$;
