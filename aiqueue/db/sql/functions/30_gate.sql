-- The gate: may a pool (and which of its kinds) have a row dispatched now.

-- The gate, "may a row be dispatched now?", written once.  Pause, busy
-- back-off, the in-flight cap and the circuit breaker; when the breaker is
-- open, one probe may run after the cool-down (half-open) and only while
-- nothing else is in flight.  aiqueue_gate_opens_at says *when* the gate opens
-- by time alone (NULL: not by waiting; an operator, a result or a lease must
-- act first); aiqueue_gate is "that moment has come".  Both are plain SQL
-- expressions, which the planner inlines into their callers when every
-- argument is a variable: an argument that is a function call (the in-flight
-- count), used more than once in the body, keeps it from being inlined, and
-- an SQL function that is not inlined is planned again on every call.
CREATE OR REPLACE FUNCTION aiqueue_gate_opens_at(ctl ai_queue_control, in_flight bigint,
                                                 cap integer, breaker_threshold integer)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN ctl.paused OR (cap <> 0 AND in_flight >= cap)
             OR (ctl.consecutive_failures >= breaker_threshold AND in_flight > 0) THEN NULL
        ELSE greatest(coalesce(ctl.busy_until, '-infinity'),
                      CASE WHEN ctl.consecutive_failures >= breaker_threshold
                           THEN coalesce(ctl.circuit_open_until, '-infinity')
                           ELSE '-infinity' END)
    END
$$;

CREATE OR REPLACE FUNCTION aiqueue_gate(ctl ai_queue_control, in_flight bigint, cap integer,
                                        breaker_threshold integer)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce(aiqueue_gate_opens_at(ctl, in_flight, cap, breaker_threshold) <= now(),
                    false)
$$;

-- The breaker as the operator sees it: open (cooling down), half_open (a probe
-- may go, or is out), closed.
CREATE OR REPLACE FUNCTION aiqueue_circuit_state(ctl ai_queue_control, breaker_threshold integer)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN ctl.consecutive_failures < breaker_threshold THEN 'closed'
        WHEN coalesce(ctl.circuit_open_until, '-infinity') > now() THEN 'open'
        ELSE 'half_open'
    END
$$;

-- Which kinds may have a row dispatched now: the gate of pools and kinds,
-- written once (the claim, its `more`, can_claim).  A pool counts when its gate
-- is open (aiqueue_gate: pause, its hold, its L, its breaker), and then each of
-- its kinds under its own cap.  With `budgets`, a pool with a declared budget
-- counts only when its window has room for its first due row's estimate
-- (`ests`: that estimate per pool, which the claim writes to the window).
-- `make`: add missing control rows (the claim; aiqueue_pool_control).
-- For the claim's answer, read here once: `filling`, the pools of `kinds` whose
-- gate closes with one more row in flight; `dirty`, those whose breaker a
-- successful dispatch must reset.
CREATE OR REPLACE FUNCTION aiqueue_room(plan jsonb, budgets boolean, make boolean,
                                        OUT kinds text[], OUT ests jsonb, OUT filling text[],
                                        OUT dirty text[])
LANGUAGE plpgsql AS $$
DECLARE
    breaker_threshold integer := (plan ->> 'breaker_threshold')::integer;
    budget_window float8 := (plan ->> 'window')::float8;
    p record;
    ctl ai_queue_control%ROWTYPE;
    pcap integer;
    busy bigint;
    open_kinds text[];
    budget record;
BEGIN
    kinds := '{}';
    ests := '{}';
    filling := '{}';
    dirty := '{}';
    FOR p IN SELECT x.name, x.cap, coalesce(x.tpm, 0) AS tpm, coalesce(x.rpm, 0) AS rpm,
                    coalesce(x.budgeted, false) AS budgeted
             FROM jsonb_to_recordset(plan -> 'pools')
                  AS x (name text, cap integer, tpm integer, rpm integer, budgeted boolean) LOOP
        ctl := aiqueue_pool_control(p.name, make);
        pcap := aiqueue_flow_cap(ctl, p.cap);
        busy := aiqueue_pool_in_flight(p.name, pcap);
        CONTINUE WHEN NOT aiqueue_gate(ctl, busy, pcap, breaker_threshold);
        open_kinds := aiqueue_pool_kinds_with_room(plan, p.name);
        CONTINUE WHEN open_kinds IS NULL;
        IF budgets AND p.budgeted THEN
            budget := aiqueue_budget_room(p.tpm, p.rpm, budget_window, open_kinds, p.name);
            CONTINUE WHEN budget.opens_at > now();
            ests := ests || jsonb_build_object(p.name, budget.est);
        END IF;
        kinds := kinds || open_kinds;
        busy := busy + 1;
        IF NOT aiqueue_gate(ctl, busy, pcap, breaker_threshold) THEN
            filling := filling || p.name;
        END IF;
        IF ctl.consecutive_failures > 0 OR ctl.circuit_open_until IS NOT NULL THEN
            dirty := dirty || p.name;
        END IF;
    END LOOP;
END
$$;

-- When a claim could next find room by time alone (the ticker's sleep): per
-- pool, the later of its gate's opening (a hold or the breaker's cool-down
-- ending; NULL while paused, full or a half-open probe is out), its budget
-- window's, and the first run_after of its kinds with room; the earliest
-- over all pools.  NULL: nothing opens by waiting.
CREATE OR REPLACE FUNCTION aiqueue_claim_opens_at(plan jsonb)
RETURNS timestamptz LANGUAGE plpgsql AS $$
DECLARE
    breaker_threshold integer := (plan ->> 'breaker_threshold')::integer;
    budget_window float8 := (plan ->> 'window')::float8;
    p record;
    ctl ai_queue_control%ROWTYPE;
    pcap integer;
    busy bigint;
    open_kinds text[];
    at timestamptz;
    due timestamptz;
    best timestamptz;
BEGIN
    FOR p IN SELECT x.name, x.cap, coalesce(x.tpm, 0) AS tpm, coalesce(x.rpm, 0) AS rpm,
                    coalesce(x.budgeted, false) AS budgeted
             FROM jsonb_to_recordset(plan -> 'pools')
                  AS x (name text, cap integer, tpm integer, rpm integer, budgeted boolean) LOOP
        ctl := aiqueue_pool_control(p.name);
        pcap := aiqueue_flow_cap(ctl, p.cap);
        busy := aiqueue_pool_in_flight(p.name, pcap);
        at := aiqueue_gate_opens_at(ctl, busy, pcap, breaker_threshold);
        CONTINUE WHEN at IS NULL;
        open_kinds := aiqueue_pool_kinds_with_room(plan, p.name);
        CONTINUE WHEN open_kinds IS NULL;
        -- Rows of groups paused at a spend cap come due when it rolls over.
        due := aiqueue_due_at(open_kinds);
        CONTINUE WHEN due IS NULL;
        IF p.budgeted THEN
            at := greatest(at, (aiqueue_budget_room(p.tpm, p.rpm, budget_window, open_kinds,
                                                    p.name)).opens_at);
        END IF;
        best := least(best, greatest(due, at));
    END LOOP;
    RETURN best;
END
$$;

-- The claim's advisory lock, held until the transaction ends.  The caps no
-- longer need it: they are slot rows (36_slots.sql), which claims take SKIP
-- LOCKED, never waiting.  What it still orders, across every instance: the
-- rows a claim writes besides its own (the turn counters' corrections, the
-- spend windows, the budget window) against a settle's after-result writes,
-- a refund, a batch's charge and a fallback's move, each of which takes it
-- before them (aiqueue 0023), so those rows are locked in one order; the
-- count-and-claim of a declared budget and of a spend cap; and an end that
-- may finish its run (90_outbox).  A claim takes it only where its plan has
-- such rules (aiqueue_plan_serial).  A plain claim locks the counter rows it
-- walks SKIP LOCKED and waits for one only while it holds no row at all
-- (42_fair_pick), so it needs no lock to stay out of a cycle.
CREATE OR REPLACE FUNCTION aiqueue_claim_lock() RETURNS void LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(7301730173017301)
$$;

-- Whether a claim under `plan` takes the claim's lock: a pool declares a
-- budget (its window is counted, then written) or a spend cap (the windows are
-- read, then charged).  The same for every claim of one configuration, so the
-- pools of such a plan keep the order among their claims they had; a plan
-- without money rules never waits on the lock, whatever other plans' claims do.
CREATE OR REPLACE FUNCTION aiqueue_plan_serial(plan jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN coalesce((plan ->> 'budgeted')::boolean, false)
        OR (jsonb_typeof(plan -> 'money') = 'object'
            AND EXISTS (SELECT 1 FROM jsonb_to_recordset(plan -> 'pools') AS x (name text)
                        WHERE aiqueue_spend_capped(plan -> 'money' -> x.name)));
END
$$;

-- Claim exactly one due row.  The caps hold through slot rows taken SKIP
-- LOCKED (36_slots.sql), so claims for different free slots proceed at once,
-- across instances; the count of a pool's and a kind's in-flight rows below
-- (aiqueue_room) is only the first look, the slot the proof (a cap counted
-- without either is exceeded under concurrency: pgqueuer#761).  Each
-- statement below takes a fresh snapshot (READ COMMITTED).  `more` says
-- whether another row could be claimed right now (the caller chains on it);
-- `breaker_dirty` whether a successful dispatch must reset the row's pool's
-- breaker.
--
-- Pools and kinds (aiqueue 0019, docs/concepts.md): aiqueue_room names the kinds
-- with room, and the one walk of the claim index in dispatch order takes the
-- first due row of any of them: a kind at its cap or a held pool is stepped
-- over, never waited for, so its backlog delays no other kind's row.
-- Flow control (aiqueue 0010, docs/concepts.md): a pool's cap is its learned
-- limit L when one is set (aiqueue_flow_cap), and with a declared budget the
-- pool's first due row goes only when the window has room for its estimated
-- tokens (under the claim's lock, aiqueue_plan_serial); its window entry is
-- written in the same statement as the claim.  What the claim reads of the
-- settings is its plan (10_plan).
-- A pending row may still be dispatched (docs/operating/alerts.md): it has no expires_at,
-- or that moment has not come.  The sweep (schedule.sql: expire_rows) ends the
-- others; until it has, the claim steps over them.
CREATE OR REPLACE FUNCTION aiqueue_unexpired(expires_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT expires_at IS NULL OR expires_at > now()
$$;
