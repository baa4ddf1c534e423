-- The claim plan: pools and kinds, and the readers of their control rows.
--
-- A kind names what a row asks for and which function does it; a pool is one
-- model key with its own limits (L, the hold, the budgets, the breaker, turns).
-- What the claim needs of the settings travels with each call as one jsonb
-- `plan`, built once per configuration (ClaimPlan, in the settings):
--   {"pools": [{"name", "cap", "tpm", "rpm", "budgeted"}],
--    "kinds": [{"name", "pool", "cap"}],
--    "breaker_threshold", "window", "budgeted", "money"}
-- `budgeted`: a pool (or, at the top, any pool) declares a budget, decided in
-- one place (Pool.budget_declared); `window`: the budget window in seconds;
-- `money`: the pools' caps and prices (50_spend) or null.
-- Sent, not stored: the file is the one place it is declared, and an instance
-- routes by the file it was started with.

-- Why the plan's readers below are plpgsql, not SQL functions: an SQL function
-- that can't be inlined (a set-returning call in FROM) is planned again on every
-- call (before PostgreSQL 18), 50-100 us each, several times per claim;
-- plpgsql caches its statements' plans per backend.

-- One pool of the plan (NULLs when the plan does not name it).
CREATE OR REPLACE FUNCTION aiqueue_plan_pool(plan jsonb, p_pool text,
                                             OUT name text, OUT cap integer,
                                             OUT tpm integer, OUT rpm integer)
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    SELECT x.name, x.cap, coalesce(x.tpm, 0), coalesce(x.rpm, 0) INTO name, cap, tpm, rpm
    FROM jsonb_to_recordset(plan -> 'pools') AS x (name text, cap integer, tpm integer,
                                                   rpm integer)
    WHERE x.name = p_pool;
END
$$;

-- A pool's control row.  `make`: add it when missing; only the claim does, under
-- the claim's advisory lock (taken here, the first time a pool is met), so two
-- instances never race for an id.  A new pool starts
-- paused when the queue is (pause is queue-wide: set_paused writes every row).
-- Without `make`, a missing pool reads as a fresh one.
CREATE OR REPLACE FUNCTION aiqueue_pool_control(p_pool text, make boolean DEFAULT false)
RETURNS ai_queue_control LANGUAGE plpgsql AS $$
DECLARE
    ctl ai_queue_control%ROWTYPE;
BEGIN
    SELECT * INTO ctl FROM ai_queue_control c WHERE c.pool = p_pool;
    IF FOUND THEN
        RETURN ctl;
    END IF;
    IF make THEN
        PERFORM aiqueue_claim_lock();
        SELECT * INTO ctl FROM ai_queue_control c WHERE c.pool = p_pool;
        IF FOUND THEN
            RETURN ctl;
        END IF;
        INSERT INTO ai_queue_control (id, pool, paused, paused_by, paused_at)
        SELECT (SELECT max(m.id) + 1 FROM ai_queue_control m), p_pool,
               c.paused, c.paused_by, c.paused_at
        FROM ai_queue_control c WHERE c.id = 1
        RETURNING * INTO ctl;
        RETURN ctl;
    END IF;
    SELECT * INTO ctl FROM ai_queue_control c WHERE c.id = 1;
    ctl.pool := p_pool;
    ctl.consecutive_failures := 0;
    ctl.circuit_open_until := NULL;
    ctl.busy_until := NULL;
    ctl.in_flight_limit := NULL;
    ctl.limit_clean := 0;
    ctl.limit_cut_at := NULL;
    ctl.limit_raised_at := NULL;
    ctl.learned_window := NULL;
    ctl.refusals_rate_limited := 0;
    ctl.refusals_overloaded := 0;
    RETURN ctl;
END
$$;

-- Rows holding a slot of one pool (ai_marking_claimed), counted only as far as
-- the gate needs (up to the cap; up to 1 when unlimited, for the half-open
-- breaker), on ai_marking_claimed_pool_idx.  The ORDER BY keeps the count on
-- that index even when the statistics are stale.
CREATE OR REPLACE FUNCTION aiqueue_pool_in_flight(p_pool text, cap integer) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) INTO n FROM (
        SELECT 1 FROM ai_marking_claimed p WHERE p.pool = p_pool
        ORDER BY p.kind, p.lease_at LIMIT greatest(cap, 1)) leased;
    RETURN n;
END
$$;

-- The same for one kind of a pool, up to the kind's cap: its own rows and the
-- rows it runs as another kind's fallback (run_kind, docs/fallback-budgets-calendar.md).
CREATE OR REPLACE FUNCTION aiqueue_kind_in_flight(p_pool text, p_kind text, cap integer)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) INTO n FROM (
        SELECT 1 FROM ai_marking_claimed p
        WHERE p.pool = p_pool AND (p.kind = p_kind OR p.run_kind = p_kind)
        ORDER BY p.lease_at LIMIT greatest(cap, 1)) leased;
    RETURN n;
END
$$;

-- The kinds of one pool that are under their own cap (0: none of their own).
-- A kind on its fallback is listed in the fallback's pool with the fallback's
-- cap (`runs_as`): the two share it (docs/fallback-budgets-calendar.md).
CREATE OR REPLACE FUNCTION aiqueue_pool_kinds_with_room(plan jsonb, p_pool text)
RETURNS text[] LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT array_agg(k.name)
            FROM jsonb_to_recordset(plan -> 'kinds')
                 AS k (name text, pool text, cap integer, runs_as text)
            WHERE k.pool = p_pool
              AND (coalesce(k.cap, 0) = 0
                   OR aiqueue_kind_in_flight(p_pool, coalesce(k.runs_as, k.name), k.cap)
                      < k.cap));
END
$$;

-- Whether a row's kind is one of `kinds`, or (kinds NULL) none of `others`:
-- recovery takes each platform's kinds in turn (aiqueue/queue/recovery.py).
CREATE OR REPLACE FUNCTION aiqueue_kind_in(p_kind text, kinds text[], others text[])
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN kinds IS NOT NULL THEN p_kind = ANY (kinds)
                ELSE NOT (p_kind = ANY (coalesce(others, '{}'))) END
$$;

-- The pools that hold some of these kinds, by the plan (aiqueue 0019); NULL:
-- any pool.
CREATE OR REPLACE FUNCTION aiqueue_kinds_pools(kinds text[], plan jsonb) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF kinds IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN coalesce((SELECT array_agg(DISTINCT k.pool)
                     FROM jsonb_to_recordset(plan -> 'kinds') AS k (name text, pool text)
                     WHERE k.name = ANY (kinds)),
                    ARRAY['default']);
END
$$;
