-- Every SQL function and trigger of aiqueue, in its current text.
--
-- `migrate up` applies this file after the schema migrations, in the same
-- transaction, whenever its text changed (or a migration ran): migrations hold
-- schema only, and a function's history is this file's git log.  Everything
-- here must be idempotent: CREATE OR REPLACE, and a DROP ... IF EXISTS first
-- where a signature or a trigger's shape changes.
--
-- The hot statements live in plpgsql functions: without a client-side
-- prepared-statement cache (transaction poolers forbid one), plpgsql is what
-- lets the server cache their plans per backend instead of planning each call.

-- == Pools and kinds (aiqueue 0019, CONTRACT §9b) ================================
--
-- A kind names what a row asks for and which function does it; a pool is one
-- model key with its own limits (L, the hold, the budgets, the breaker, turns).
-- What the claim needs of aiqueue.toml travels with each call as a jsonb
-- `plan` (aiqueue/config.py, QueueConfig.plan):
--   {"pools": [{"name", "cap", "tpm", "rpm"}], "kinds": [{"name", "pool", "cap"}]}
-- Sent, not stored: the file is the one place it is declared, and an instance
-- routes by the file it was started with.  Without a plan a call means what it
-- meant before pools: one pool 'default' with the cap (and budget) passed, and
-- one kind 'mark' with no cap of its own.
CREATE OR REPLACE FUNCTION aiqueue_default_plan(cap integer, tpm integer, rpm integer)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'pools', jsonb_build_array(jsonb_build_object('name', 'default', 'cap', cap,
                                                      'tpm', tpm, 'rpm', rpm)),
        'kinds', jsonb_build_array(jsonb_build_object('name', 'mark', 'pool', 'default',
                                                      'cap', 0)))
$$;

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

-- Whether any pool of the plan declares a budget.
CREATE OR REPLACE FUNCTION aiqueue_plan_budgeted(plan jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN coalesce((SELECT bool_or(coalesce(x.tpm, 0) > 0 OR coalesce(x.rpm, 0) > 0)
                     FROM jsonb_to_recordset(plan -> 'pools') AS x (tpm integer, rpm integer)),
                    false);
END
$$;

-- A pool's control row.  `make`: add it when missing; only the claim does, under
-- its advisory lock, so two instances never race for an id.  A new pool starts
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
    ctl.refusals_rate_limited := 0;
    ctl.refusals_overloaded := 0;
    RETURN ctl;
END
$$;

-- Rows holding a slot of one pool, counted only as far as the gate needs (see
-- aiqueue_in_flight), on ai_marking_queue_pool_lease_idx.
CREATE OR REPLACE FUNCTION aiqueue_pool_in_flight(p_pool text, cap integer) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) INTO n FROM (
        SELECT 1 FROM ai_marking_queue p WHERE p.pool = p_pool AND p.lease_at IS NOT NULL
        ORDER BY p.kind, p.lease_at LIMIT greatest(cap, 1)) leased;
    RETURN n;
END
$$;

-- The same for one kind of a pool, up to the kind's cap.
CREATE OR REPLACE FUNCTION aiqueue_kind_in_flight(p_pool text, p_kind text, cap integer)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) INTO n FROM (
        SELECT 1 FROM ai_marking_queue p
        WHERE p.pool = p_pool AND p.kind = p_kind AND p.lease_at IS NOT NULL
        ORDER BY p.lease_at LIMIT greatest(cap, 1)) leased;
    RETURN n;
END
$$;

-- The kinds of one pool that are under their own cap (0: none of their own).
CREATE OR REPLACE FUNCTION aiqueue_pool_kinds_with_room(plan jsonb, p_pool text)
RETURNS text[] LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT array_agg(k.name)
            FROM jsonb_to_recordset(plan -> 'kinds') AS k (name text, pool text, cap integer)
            WHERE k.pool = p_pool
              AND (coalesce(k.cap, 0) = 0
                   OR aiqueue_kind_in_flight(p_pool, k.name, k.cap) < k.cap));
END
$$;

-- == Flow control for a shared paid model (aiqueue 0010, CONTRACT §8a) ==
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
-- ceiling L is cleared (NULL), which keeps the hot path write-free.
CREATE OR REPLACE FUNCTION aiqueue_flow_after_result(lim integer, clean integer,
                                                     ceiling integer,
                                                     OUT new_limit integer, OUT new_clean integer)
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN lim IS NULL OR lim + 1 >= ceiling AND clean + 1 >= lim THEN NULL
                WHEN clean + 1 >= lim THEN lim + 1
                ELSE lim END,
           CASE WHEN lim IS NULL OR clean + 1 >= lim THEN 0 ELSE clean + 1 END
$$;

-- A result arrived (no refusal): raise its pool's L, and (`budgeted`: a budget
-- is declared) put the result's reported usage in place of the claim's
-- estimate in the budget window.  The common case (every L at its ceiling, no
-- budget) costs one read of the control rows and writes nothing: this runs
-- once per job.  `cap`: the default pool's, for a call without a plan.
DROP FUNCTION IF EXISTS aiqueue_flow_result(uuid, integer, jsonb, integer, boolean);
CREATE OR REPLACE FUNCTION aiqueue_flow_result(p_queue_id uuid, p_dispatch_seq integer,
                                               p_usage jsonb, cap integer, budgeted boolean,
                                               plan jsonb DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF NOT budgeted AND NOT EXISTS (SELECT 1 FROM ai_queue_control c
                                    WHERE c.in_flight_limit IS NOT NULL) THEN
        RETURN true;
    END IF;
    UPDATE ai_queue_control c
    SET (in_flight_limit, limit_clean) = (
        SELECT r.new_limit, r.new_clean
        FROM aiqueue_flow_after_result(least(c.in_flight_limit, aiqueue_flow_ceiling(t.cap)),
                                       c.limit_clean, aiqueue_flow_ceiling(t.cap)) r)
    FROM (SELECT q.pool, coalesce((aiqueue_plan_pool(plan, q.pool)).cap, cap) AS cap
          FROM ai_marking_queue q WHERE q.queue_id = p_queue_id) t
    WHERE c.pool = t.pool AND c.in_flight_limit IS NOT NULL;
    IF NOT budgeted THEN
        RETURN true;
    END IF;
    -- The claim writes the window too (and prunes it): its lock first (aiqueue 0023).
    PERFORM aiqueue_claim_lock();
    UPDATE ai_marking_budget b
    SET tokens = aiqueue_usage_int(p_usage -> 'prompt_tokens')
                 + aiqueue_usage_int(p_usage -> 'completion_tokens'),
        actual = true
    WHERE b.queue_id = p_queue_id AND b.dispatch_seq = p_dispatch_seq
      AND aiqueue_usage_int(p_usage -> 'prompt_tokens') IS NOT NULL
      AND aiqueue_usage_int(p_usage -> 'completion_tokens') IS NOT NULL;
    RETURN true;
END
$$;

-- A row's estimated tokens: what the latest rows of its assignment used in its
-- pool (the mean of the last 20 reported), else of any assignment of the pool,
-- else 1000.
DROP FUNCTION IF EXISTS aiqueue_budget_estimate(text);
CREATE OR REPLACE FUNCTION aiqueue_budget_estimate(p_assignment_id text,
                                                   p_pool text DEFAULT 'default')
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT round(avg(x.tokens))::bigint FROM (
             SELECT b.tokens FROM ai_marking_budget b
             WHERE b.actual AND b.assignment_id = p_assignment_id AND b.pool = p_pool
             ORDER BY b.at DESC LIMIT 20) x),
        (SELECT round(avg(x.tokens))::bigint FROM (
             SELECT b.tokens FROM ai_marking_budget b
             WHERE b.actual AND b.pool = p_pool ORDER BY b.at DESC LIMIT 20) x),
        1000)
$$;

-- When a pool's budget window has room for `est` more tokens and one more
-- request: now() or earlier when it has, else the moment enough of its entries
-- age out.  The window holds at most rate × W / 60 over any W seconds
-- (CONTRACT §8a).  A row larger than the whole budget waits for an empty
-- window, not forever.  Entries are walked newest first: the first one whose
-- running sum (with est) no longer fits is the newest that must leave, at its
-- time + W.
DROP FUNCTION IF EXISTS aiqueue_budget_opens_at(integer, integer, float8, bigint);
CREATE OR REPLACE FUNCTION aiqueue_budget_opens_at(tpm integer, rpm integer, budget_window float8,
                                                   est bigint, p_pool text DEFAULT 'default')
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    WITH w AS (
        SELECT b.at,
               sum(b.tokens) OVER newest AS tokens,
               count(*) OVER newest AS requests
        FROM ai_marking_budget b
        WHERE b.pool = p_pool AND b.at > now() - make_interval(secs => budget_window)
        WINDOW newest AS (ORDER BY b.at DESC, b.queue_id, b.dispatch_seq)
    )
    SELECT coalesce(max(w.at), '-infinity') + make_interval(secs => budget_window)
    FROM w
    WHERE (tpm > 0 AND w.tokens + least(est, floor(tpm * budget_window / 60))
                       > floor(tpm * budget_window / 60))
       OR (rpm > 0 AND w.requests + 1 > greatest(floor(rpm * budget_window / 60), 1))
$$;

-- What a pool's budget window holds now (stats, /ai-queue).
DROP FUNCTION IF EXISTS aiqueue_budget_use(float8);
CREATE OR REPLACE FUNCTION aiqueue_budget_use(budget_window float8, p_pool text DEFAULT 'default',
                                              OUT tokens bigint, OUT requests bigint)
LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(b.tokens), 0)::bigint, count(*)
    FROM ai_marking_budget b
    WHERE b.pool = p_pool AND b.at > now() - make_interval(secs => budget_window)
$$;

-- A refusal (a `rate_limited`/`overloaded` item, or a dispatch answered
-- 429/503) of a row's current dispatch: the row goes back to pending without
-- using an attempt, due after `delay`; every dispatch of the row's pool — and
-- of no other pool — is held as long (busy_until); the pool's L is cut once per
-- burst; the refused call used none of the budget's tokens (it still counts as
-- a request).  A row first refused more than `give_up` seconds ago ends failed
-- with last_error = rate_limited.  The row's new status, or NULL when that
-- dispatch is no longer its current one.  `cap`: the default pool's, for a
-- call without a plan.
DROP FUNCTION IF EXISTS aiqueue_flow_refused(uuid, integer, text, float8, float8, integer);
CREATE OR REPLACE FUNCTION aiqueue_flow_refused(p_queue_id uuid, p_dispatch_seq integer,
                                                p_kind text, delay float8, give_up float8,
                                                cap integer, plan jsonb DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r ai_marking_queue%ROWTYPE;
    ctl ai_queue_control%ROWTYPE;
    same_burst boolean;
    gone boolean;
    outcome text;
BEGIN
    SELECT * INTO r FROM ai_marking_queue q
    WHERE q.queue_id = p_queue_id AND q.status = 'processing' AND q.dispatch_seq = p_dispatch_seq
    FOR UPDATE;
    IF NOT FOUND THEN
        -- A late result completed the row while this dispatch was refused: the
        -- slot it held is free now (see aiqueue_complete).
        UPDATE ai_marking_queue q SET lease_at = NULL
        WHERE q.queue_id = p_queue_id AND q.status = 'completed'
          AND q.dispatch_seq = p_dispatch_seq AND q.lease_at IS NOT NULL;
        RETURN NULL;
    END IF;
    cap := coalesce((aiqueue_plan_pool(plan, r.pool)).cap, cap);
    -- The pool's control row lock orders concurrent refusals: the second of a
    -- burst sees the first one's cut.  (The claim that dispatched the row made it.)
    SELECT * INTO ctl FROM ai_queue_control c WHERE c.pool = r.pool FOR UPDATE;
    same_burst := ctl.limit_cut_at IS NOT NULL AND r.started_at < ctl.limit_cut_at;
    UPDATE ai_queue_control c
    SET in_flight_limit = aiqueue_flow_after_refusal(
            c.in_flight_limit, aiqueue_flow_ceiling(cap),
            aiqueue_pool_in_flight(r.pool, aiqueue_flow_ceiling(cap)), same_burst),
        limit_clean = CASE WHEN same_burst THEN c.limit_clean ELSE 0 END,
        limit_cut_at = CASE WHEN same_burst THEN c.limit_cut_at ELSE now() END,
        busy_until = greatest(coalesce(c.busy_until, now()),
                              now() + make_interval(secs => delay)),
        refusals_rate_limited = c.refusals_rate_limited + (p_kind = 'rate_limited')::int,
        refusals_overloaded = c.refusals_overloaded + (p_kind = 'overloaded')::int
    WHERE c.pool = r.pool;
    gone := r.refused_since IS NOT NULL
            AND r.refused_since < now() - make_interval(secs => give_up);
    outcome := CASE WHEN gone THEN 'failed' ELSE 'pending' END;
    UPDATE ai_marking_queue q
    SET status = outcome, attempts = q.attempts - 1,
        run_after = now() + make_interval(secs => delay),
        started_at = NULL, lease_at = NULL, updated_at = now(),
        finished_at = CASE WHEN gone THEN now() END,
        last_error = CASE WHEN gone THEN 'rate_limited' ELSE p_kind END,
        refused_since = coalesce(q.refused_since, now())
    WHERE q.queue_id = p_queue_id;
    UPDATE ai_marking_attempts a SET ended_at = now(), outcome = 'refused', error = p_kind
    WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq AND a.kind = 'dispatch';
    UPDATE ai_marking_budget b SET tokens = 0
    WHERE b.queue_id = p_queue_id AND b.dispatch_seq = p_dispatch_seq;
    PERFORM aiqueue_money_refund(p_queue_id);
    INSERT INTO ai_marking_tally (outcome, job, error)
    VALUES ('refused', CASE WHEN gone THEN 'failed' END, CASE WHEN gone THEN 'rate_limited'
                                                              ELSE p_kind END);
    RETURN outcome;
END
$$;

-- The gate, "may a row be dispatched now?", written once.  Pause, busy
-- back-off, the in-flight cap and the circuit breaker; when the breaker is
-- open, one probe may run after the cool-down (half-open) and only while
-- nothing else is in flight.  aiqueue_gate_opens_at says *when* the gate opens
-- by time alone (NULL: not by waiting; an operator, a result or a lease must
-- act first); aiqueue_gate is "that moment has come".  Both are plain SQL
-- expressions, which the planner inlines into their callers.
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

-- Rows holding a slot, counted only as far as the gate needs (up to the cap;
-- up to 1 when unlimited, for the half-open breaker).  The ORDER BY keeps the
-- count on ai_marking_queue_lease_idx even when the statistics are stale: a
-- plain count(*) is planned as a scan of the whole table whenever they say many
-- rows hold a lease (e.g. before the first ANALYZE of a big enqueue).
CREATE OR REPLACE FUNCTION aiqueue_in_flight(cap integer) RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) INTO n FROM (
        SELECT 1 FROM ai_marking_queue p WHERE p.lease_at IS NOT NULL
        ORDER BY p.lease_at LIMIT greatest(cap, 1)) leased;
    RETURN n;
END
$$;

DROP FUNCTION IF EXISTS aiqueue_gate_open(integer, integer);

-- Which kinds may have a row dispatched now: the gate of pools and kinds,
-- written once (the claim, its `more`, can_claim).  A pool counts when its gate
-- is open (aiqueue_gate: pause, its hold, its L, its breaker), and then each of
-- its kinds under its own cap.  With `budgets`, a pool with a declared budget
-- counts only when its window has room for its first due row's estimate
-- (`ests`: that estimate per pool, which the claim writes to the window).
-- `make`: add missing control rows (the claim, under its lock).
CREATE OR REPLACE FUNCTION aiqueue_room(plan jsonb, breaker_threshold integer,
                                        budget_window float8, budgets boolean, make boolean,
                                        OUT kinds text[], OUT ests jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    p record;
    ctl ai_queue_control%ROWTYPE;
    pcap integer;
    open_kinds text[];
    est bigint;
BEGIN
    kinds := '{}';
    ests := '{}';
    FOR p IN SELECT x.name, x.cap, coalesce(x.tpm, 0) AS tpm, coalesce(x.rpm, 0) AS rpm
             FROM jsonb_to_recordset(plan -> 'pools')
                  AS x (name text, cap integer, tpm integer, rpm integer) LOOP
        ctl := aiqueue_pool_control(p.name, make);
        pcap := aiqueue_flow_cap(ctl, p.cap);
        CONTINUE WHEN NOT aiqueue_gate(ctl, aiqueue_pool_in_flight(p.name, pcap), pcap,
                                       breaker_threshold);
        open_kinds := aiqueue_pool_kinds_with_room(plan, p.name);
        CONTINUE WHEN open_kinds IS NULL;
        IF budgets AND (p.tpm > 0 OR p.rpm > 0) THEN
            est := aiqueue_budget_estimate((
                SELECT o.assignment_id FROM ai_marking_queue o
                WHERE o.status = 'pending' AND o.run_after <= now() AND o.kind = ANY (open_kinds)
                ORDER BY o.priority DESC, o.turn, o.seq LIMIT 1), p.name);
            CONTINUE WHEN aiqueue_budget_opens_at(p.tpm, p.rpm, budget_window, est, p.name)
                          > now();
            ests := ests || jsonb_build_object(p.name, est);
        END IF;
        kinds := kinds || open_kinds;
    END LOOP;
END
$$;

-- When a claim could next find room by time alone (the ticker's sleep): per
-- pool, the later of its gate's opening (a hold or the breaker's cool-down
-- ending; NULL while paused, full or a half-open probe is out), its budget
-- window's, and the first run_after of its kinds with room; the earliest
-- over all pools.  NULL: nothing opens by waiting.
CREATE OR REPLACE FUNCTION aiqueue_claim_opens_at(plan jsonb, breaker_threshold integer,
                                                  budget_window float8)
RETURNS timestamptz LANGUAGE plpgsql AS $$
DECLARE
    p record;
    ctl ai_queue_control%ROWTYPE;
    pcap integer;
    open_kinds text[];
    at timestamptz;
    due timestamptz;
    best timestamptz;
BEGIN
    FOR p IN SELECT x.name, x.cap, coalesce(x.tpm, 0) AS tpm, coalesce(x.rpm, 0) AS rpm
             FROM jsonb_to_recordset(plan -> 'pools')
                  AS x (name text, cap integer, tpm integer, rpm integer) LOOP
        ctl := aiqueue_pool_control(p.name);
        pcap := aiqueue_flow_cap(ctl, p.cap);
        at := aiqueue_gate_opens_at(ctl, aiqueue_pool_in_flight(p.name, pcap), pcap,
                                    breaker_threshold);
        CONTINUE WHEN at IS NULL;
        open_kinds := aiqueue_pool_kinds_with_room(plan, p.name);
        CONTINUE WHEN open_kinds IS NULL;
        -- Rows of groups paused at a spend cap come due when it rolls over.
        due := aiqueue_due_at(open_kinds);
        CONTINUE WHEN due IS NULL;
        IF p.tpm > 0 OR p.rpm > 0 THEN
            at := greatest(at, aiqueue_budget_opens_at(p.tpm, p.rpm, budget_window,
                aiqueue_budget_estimate((
                    SELECT o.assignment_id FROM ai_marking_queue o
                    WHERE o.status = 'pending' AND o.run_after <= now()
                      AND o.kind = ANY (open_kinds)
                    ORDER BY o.priority DESC, o.turn, o.seq LIMIT 1), p.name), p.name));
        END IF;
        best := least(best, greatest(due, at));
    END LOOP;
    RETURN best;
END
$$;

-- The claim's advisory lock (see aiqueue_claim), held until the transaction ends.
CREATE OR REPLACE FUNCTION aiqueue_claim_lock() RETURNS void LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(7301730173017301)
$$;

-- Claim exactly one due row.  The advisory lock serialises count-and-claim
-- across every instance until this transaction ends, so no pool's L and no
-- kind's cap can be overshot (a cap counted outside this lock is exceeded
-- under concurrency: pgqueuer#761); each statement below takes a fresh
-- snapshot (READ COMMITTED), so it sees what the previous lock holder
-- committed.  `more` says whether another row could be claimed right now (the
-- caller chains on it); `breaker_dirty` whether a successful dispatch must
-- reset the row's pool's breaker.
--
-- Pools and kinds (aiqueue 0019, CONTRACT §9b): aiqueue_room names the kinds
-- with room, and the one walk of the claim index in dispatch order takes the
-- first due row of any of them: a kind at its cap or a held pool is stepped
-- over, never waited for, so its backlog delays no other kind's row.
-- Flow control (aiqueue 0010, CONTRACT §8a), in the same lock: a pool's cap is
-- its learned limit L when one is set (aiqueue_flow_cap), and with a declared
-- budget the pool's first due row goes only when the window has room for its
-- estimated tokens; its window entry is written in the same statement as the
-- claim.  cap/tpm/rpm: the default pool's, for a call without a plan.
-- A pending row may still be dispatched (CONTRACT §9d): it has no expires_at,
-- or that moment has not come.  The sweep (queries.sql: expire_rows) ends the
-- others; until it has, the claim steps over them.
CREATE OR REPLACE FUNCTION aiqueue_unexpired(expires_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT expires_at IS NULL OR expires_at > now()
$$;

DROP FUNCTION IF EXISTS aiqueue_claim(integer, integer);
DROP FUNCTION IF EXISTS aiqueue_claim(integer, integer, integer, integer, float8);
DROP FUNCTION IF EXISTS aiqueue_settle(uuid, jsonb, jsonb, integer, integer, integer);
DROP FUNCTION IF EXISTS aiqueue_settle(uuid, jsonb, jsonb, integer, integer, integer, integer,
                                       integer, float8);
-- aiqueue 0019's signatures (with the plan, without the money).
DROP FUNCTION IF EXISTS aiqueue_claim(integer, integer, integer, integer, float8, jsonb);
DROP FUNCTION IF EXISTS aiqueue_settle(uuid, jsonb, jsonb, integer, integer, integer, integer,
                                       integer, float8, jsonb);
CREATE OR REPLACE FUNCTION aiqueue_claim(cap integer, breaker_threshold integer,
                                         tpm integer DEFAULT 0, rpm integer DEFAULT 0,
                                         budget_window float8 DEFAULT 60,
                                         plan jsonb DEFAULT NULL, money jsonb DEFAULT NULL)
RETURNS TABLE (queue_id uuid, submission_id uuid, assignment_id text, attempts integer,
               dispatch_seq integer, payload text, content text, more boolean,
               breaker_dirty boolean, kind text, pool text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    room record;
    claimable text[];
    got record;
    ctl ai_queue_control%ROWTYPE;
    pcap integer;
    kcap integer;
BEGIN
    PERFORM aiqueue_claim_lock();
    plan := coalesce(plan, aiqueue_default_plan(cap, tpm, rpm));
    SELECT * INTO room FROM aiqueue_room(plan, breaker_threshold, budget_window, true, true);
    claimable := room.kinds;
    IF cardinality(claimable) = 0 THEN
        RETURN;
    END IF;
    IF room.ests <> '{}'::jsonb THEN
        DELETE FROM ai_marking_budget b WHERE b.at < now() - interval '1 day';
    END IF;
    WITH next AS MATERIALIZED (
        -- Turns by tokens (aiqueue 0022): the first due row, of a kind with
        -- room, of the waiting group with the smallest counter; priority first,
        -- turns by rows (aiqueue 0007) breaking ties; rows waiting out a backoff,
        -- kinds without room and groups at a spend cap are stepped over, not
        -- waited for.  It comes locked (SKIP LOCKED) with the charge its group
        -- was given.
        SELECT p.queue_id, p.tokens, p.usd
        FROM aiqueue_fair_pick(claimable, plan, money) p
        WHERE p.queue_id IS NOT NULL
    ),
    claimed AS (
        UPDATE ai_marking_queue q
        SET status = 'processing', attempts = q.attempts + 1, dispatch_seq = q.dispatch_seq + 1,
            started_at = now(), lease_at = now(), progress = NULL, updated_at = now(),
            charged_tokens = next.tokens, charged_usd = next.usd, charged_at = now()
        FROM next
        WHERE q.queue_id = next.queue_id
        RETURNING q.queue_id, q.submission_id, q.assignment_id, q.attempts, q.dispatch_seq,
                  q.payload_id, q.kind, q.pool
    ),
    history AS (
        INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt)
        SELECT cl.queue_id, cl.dispatch_seq, cl.attempts FROM claimed cl
    ),
    -- The budget window's entry (only while the row's pool declares a budget).
    budget AS (
        INSERT INTO ai_marking_budget (queue_id, dispatch_seq, assignment_id, tokens, pool)
        SELECT cl.queue_id, cl.dispatch_seq, cl.assignment_id, (room.ests ->> cl.pool)::bigint,
               cl.pool
        FROM claimed cl
        WHERE room.ests ? cl.pool
    )
    SELECT cl.queue_id, cl.submission_id, cl.assignment_id, cl.attempts, cl.dispatch_seq,
           -- The enqueue's payload, stored once (migration 0014); none is '{}'.
           coalesce(pl.payload, '{}'::jsonb)::text AS payload, s.content, cl.kind, cl.pool
    INTO got
    FROM claimed cl JOIN submissions s ON s.id = cl.submission_id
    LEFT JOIN ai_marking_payloads pl ON pl.id = cl.payload_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- After the claim (this transaction sees its own row as processing): which
    -- kinds still have room, and whether one of them has a due row.  Only the
    -- claimed row's pool and kind changed (the lock keeps every other pool as
    -- aiqueue_room found it): its pool's gate, then its kind's cap.
    ctl := aiqueue_pool_control(got.pool);
    pcap := aiqueue_flow_cap(ctl, (aiqueue_plan_pool(plan, got.pool)).cap);
    kcap := (SELECT k.cap FROM jsonb_to_recordset(plan -> 'kinds') AS k (name text, cap integer)
             WHERE k.name = got.kind);
    IF NOT aiqueue_gate(ctl, aiqueue_pool_in_flight(got.pool, pcap), pcap, breaker_threshold)
    THEN
        claimable := ARRAY(SELECT c FROM unnest(claimable) c
                           WHERE c NOT IN (SELECT k.name FROM jsonb_to_recordset(plan -> 'kinds')
                                                AS k (name text, pool text)
                                           WHERE k.pool = got.pool));
    ELSIF coalesce(kcap, 0) > 0 AND aiqueue_kind_in_flight(got.pool, got.kind, kcap) >= kcap THEN
        claimable := array_remove(claimable, got.kind);
    END IF;
    -- No kind with room: no walk (it would step over every pending row).
    more := cardinality(claimable) > 0;
    IF more THEN
        -- Another due row of a kind with room, in a group not paused at a spend cap.
        more := aiqueue_due_exists(claimable, plan, got.queue_id);
    END IF;
    RETURN QUERY SELECT
        got.queue_id, got.submission_id, got.assignment_id, got.attempts, got.dispatch_seq,
        got.payload, got.content, more,
        ctl.consecutive_failures > 0 OR ctl.circuit_open_until IS NOT NULL,
        got.kind, got.pool;
END
$$;

-- The processing-time buckets of the /metrics histogram (upper bounds, seconds).
CREATE OR REPLACE FUNCTION aiqueue_buckets() RETURNS float8[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY[0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600]::float8[]
$$;

-- Apply a result at most once: the row lock plus the status test mean a second
-- (concurrent or later) delivery finds the row completed and changes nothing.
-- A late result of an earlier dispatch still completes a row that is not done.
-- In the same statement: the review record of what the result replaced
-- (ai_marking_results) and one counter delta (ai_marking_tally).
CREATE OR REPLACE FUNCTION aiqueue_complete(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                                 p_dispatch_seq integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH row AS (
        SELECT q.queue_id, q.submission_id, q.assignment_id, q.run_id, q.group_key,
               q.kind, q.pool, date_part('epoch', now() - q.started_at) AS seconds
        FROM ai_marking_queue q
        WHERE q.queue_id = p_queue_id AND q.status IN ('pending', 'processing', 'failed')
        FOR UPDATE
    ),
    -- What the result replaces.  The lock makes this read the newest committed
    -- mark (a revert that committed while we waited), not this statement's
    -- snapshot: the record then says exactly what a revert must restore.
    prev AS (
        SELECT s.id, s.ai_result, s.ai_marked_at
        FROM submissions s JOIN row ON s.id = row.submission_id
        FOR UPDATE OF s
    ),
    sub AS (
        UPDATE submissions s SET ai_result = p_result, ai_marked_at = now()
        FROM prev WHERE s.id = prev.id
        RETURNING s.id
    ),
    done AS (
        UPDATE ai_marking_queue q
        SET status = 'completed', finished_at = now(), last_error = NULL,
            usage = p_usage, updated_at = now(),
            -- A late result of an earlier dispatch: the current one is still at
            -- the function, so the row keeps its slot until that one reports
            -- or its lease runs out; otherwise the function would get one
            -- job more than the cap.
            lease_at = CASE WHEN q.status = 'processing' AND q.dispatch_seq <> p_dispatch_seq
                            THEN q.lease_at END
        FROM row, sub
        WHERE q.queue_id = row.queue_id
        RETURNING q.queue_id
    ),
    history AS (
        UPDATE ai_marking_attempts a
        SET ended_at = now(), usage = p_usage,
            outcome = CASE WHEN a.ended_at IS NULL THEN 'completed' ELSE 'completed_late' END
        FROM done
        WHERE a.queue_id = done.queue_id AND a.dispatch_seq = p_dispatch_seq
          AND a.kind = 'dispatch'
        RETURNING a.outcome
    ),
    usage AS (
        SELECT p_usage ->> 'model' AS model,
               coalesce(aiqueue_usage_int(p_usage -> 'prompt_tokens'), 0) AS prompt_tokens,
               coalesce(aiqueue_usage_int(p_usage -> 'completion_tokens'), 0)
                   AS completion_tokens,
               CASE WHEN jsonb_typeof(p_usage -> 'cost_usd') = 'number'
                    THEN (p_usage ->> 'cost_usd')::numeric END AS cost_usd
    ),
    record AS (
        INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, run_id, "group",
                                        result, previous_result, previous_marked_at, model,
                                        prompt_tokens, completion_tokens, cost_usd,
                                        processing_seconds, kind, pool, lane)
        SELECT row.queue_id, row.submission_id, row.assignment_id, row.run_id, row.group_key,
               p_result, prev.ai_result, prev.ai_marked_at, u.model,
               aiqueue_usage_int(p_usage -> 'prompt_tokens'),
               aiqueue_usage_int(p_usage -> 'completion_tokens'), u.cost_usd, row.seconds,
               row.kind, row.pool,
               -- the overnight lane (0020) marks its usage; everything else is live
               CASE WHEN p_usage ->> 'lane' = 'batch' THEN 'batch' ELSE 'live' END
        FROM row JOIN prev ON prev.id = row.submission_id JOIN done ON true, usage u
        -- A backfilled record (migration 0008) of a row completed before: keep it.
        ON CONFLICT (queue_id) DO NOTHING
    ),
    tally AS (
        INSERT INTO ai_marking_tally (outcome, job, model, le, prompt_tokens, completion_tokens,
                                      cost_usd, seconds)
        SELECT coalesce((SELECT h.outcome FROM history h LIMIT 1), 'completed'), 'completed',
               u.model,
               (SELECT min(b) FROM unnest(aiqueue_buckets()) b WHERE b >= row.seconds),
               u.prompt_tokens, u.completion_tokens, coalesce(u.cost_usd, 0),
               coalesce(row.seconds, 0)
        FROM done, row, usage u
    )
    SELECT count(*) INTO n FROM done;
    IF n = 0 THEN
        -- The current dispatch of a row a late result completed: its slot is free.
        UPDATE ai_marking_queue q SET lease_at = NULL
        WHERE q.queue_id = p_queue_id AND q.status = 'completed'
          AND q.dispatch_seq = p_dispatch_seq AND q.lease_at IS NOT NULL;
    END IF;
    RETURN n > 0;
END
$$;

-- A token count from a usage object: a non-negative whole number, else NULL.
CREATE OR REPLACE FUNCTION aiqueue_usage_int(v jsonb) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(v) = 'number' AND (v::text)::numeric >= 0
                     AND (v::text)::numeric < 1e15
                THEN round((v::text)::numeric)::bigint END
$$;

-- == A shared model's money (aiqueue 0022, CONTRACT §9c) ==========================
--
-- Turns by tokens: the Virtual Token Counter of Sheng et al., "Fairness in
-- Serving Large Language Models" (OSDI 2024).  Each group has a counter per
-- pool and priority (ai_marking_fair); a dispatch charges it input + 2 × output
-- of the row's estimated tokens, the result's usage corrects the charge, and
-- the claim serves the waiting group with the smallest counter.  A group that
-- starts waiting is first lifted to the smallest counter of the groups already
-- waiting, so idleness banks no credit.  Spend caps pause a group (or a pool)
-- until its UTC hour or day rolls over; they never fail a row.
--
-- What the rules need of the settings travels with each call as a jsonb
-- `money` (aiqueue/queue/spend.py, MoneyPlan.doc): per pool its caps, its
-- prices and the length of its windows:
--   {"<pool>": {"group_usd_per_hour", "group_usd_per_day", "pool_usd_per_day",
--               "prices": {"<model>": [in, out]}, "top": [in, out],
--               "hour_seconds", "day_seconds"}}
-- A pool it does not name has no cap and no price.

-- The weight a dispatch is charged: input + 2 × output tokens (VTC's weights).
CREATE OR REPLACE FUNCTION aiqueue_fair_weight(prompt float8, completion float8) RETURNS float8
LANGUAGE sql IMMUTABLE AS $$
    SELECT prompt + 2 * completion
$$;

-- Where a group that starts waiting is lifted to: the smallest counter of the
-- groups already waiting at its pool and priority; with none waiting, the
-- largest counter there (the last groups served), so a long-idle group banks
-- no credit either.  NULL: the first group ever.
CREATE OR REPLACE FUNCTION aiqueue_fair_floor(p_pool text, p_priority integer) RETURNS float8
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT f.counter FROM ai_marking_fair f
         WHERE f.waiting AND f.pool = p_pool AND f.priority = p_priority
         ORDER BY f.priority DESC, f.counter LIMIT 1),
        (SELECT f.counter FROM ai_marking_fair f
         WHERE f.pool = p_pool AND f.priority = p_priority
         ORDER BY f.counter DESC LIMIT 1))
$$;

-- Rows of a group joined it (an enqueue, a row back to pending): the group
-- waits, lifted first when it was not waiting; `joins` tells a claim that
-- looked before that the group is not empty after all.
CREATE OR REPLACE FUNCTION aiqueue_fair_wait(p_pool text, p_priority integer, p_group text,
                                             p_turn bigint, p_seq bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO ai_marking_fair AS f (pool, priority, group_key, counter, waiting, head_turn,
                                      head_seq, joins)
    SELECT p_pool, p_priority, p_group, coalesce(aiqueue_fair_floor(p_pool, p_priority), 0),
           true, coalesce(h.turn, p_turn), coalesce(h.seq, p_seq), 1
    -- The group's first pending row now (rows of it may have been cancelled).
    FROM (SELECT NULL) x
    LEFT JOIN LATERAL (
        SELECT q.turn, q.seq FROM ai_marking_queue q
        WHERE q.status = 'pending' AND q.pool = p_pool AND q.priority = p_priority
          AND coalesce(q.group_key, q.assignment_id) = p_group
        ORDER BY q.turn, q.seq LIMIT 1) h ON true
    ON CONFLICT (pool, priority, group_key) DO UPDATE
    SET counter = CASE WHEN f.waiting THEN f.counter
                       ELSE greatest(f.counter, EXCLUDED.counter) END,
        head_turn = EXCLUDED.head_turn, head_seq = EXCLUDED.head_seq,
        waiting = true, joins = f.joins + 1, due_at = NULL, updated_at = now()
$$;

CREATE OR REPLACE FUNCTION aiqueue_fair_join_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- In key order, so that two enqueues lock the groups' rows in one order.
    PERFORM aiqueue_fair_wait(n.pool, n.priority, n.grp, n.turn, n.seq)
    FROM (SELECT DISTINCT ON (1, 2, 3) r.pool, r.priority,
                 coalesce(r.group_key, r.assignment_id) AS grp, r.turn, r.seq
          FROM new_rows r WHERE r.status = 'pending' ORDER BY 1, 2, 3, r.turn, r.seq) n;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION aiqueue_fair_join_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM aiqueue_fair_wait(NEW.pool, NEW.priority,
                              coalesce(NEW.group_key, NEW.assignment_id), NEW.turn, NEW.seq);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER ai_marking_queue_fair_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_fair_join_rows();
-- A bulk move (aiqueue_retry, aiqueue.bulk_move) joins its groups itself, once
-- per group rather than once per row (aiqueue 0023).  So does the overnight
-- lane when it moves a whole batch back (aiqueue/db/batch.py): it sets
-- aiqueue.fair_bulk for that statement, which keeps the change feed's row
-- trigger, and then calls aiqueue_fair_join_ids (this trigger was 85 % of a
-- 2,000-row fallback).
CREATE OR REPLACE TRIGGER ai_marking_queue_fair_upd
    AFTER UPDATE OF status ON ai_marking_queue
    FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status IS DISTINCT FROM 'pending'
                       AND current_setting('aiqueue.bulk_move', true) IS DISTINCT FROM 'on'
                       AND current_setting('aiqueue.fair_bulk', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION aiqueue_fair_join_row();

-- The groups of rows `p_ids` that are pending now join their turns, once each,
-- in key order, at their first pending row (the row trigger's work, set-based).
CREATE OR REPLACE FUNCTION aiqueue_fair_join_ids(p_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM aiqueue_fair_wait(n.pool, n.priority, n.grp, n.turn, n.seq)
    FROM (SELECT DISTINCT ON (1, 2, 3) q.pool, q.priority,
                 coalesce(q.group_key, q.assignment_id) AS grp, q.turn, q.seq
          FROM ai_marking_queue q
          WHERE q.queue_id = ANY (p_ids) AND q.status = 'pending'
          ORDER BY 1, 2, 3, q.turn, q.seq) n;
END
$$;

-- A pending row made due sooner without a status change (the batch lane
-- handing rows back, a reschedule): its group's due_at may be too late now,
-- so it is forgotten, and `joins` tells a claim computing it meanwhile.
CREATE OR REPLACE FUNCTION aiqueue_fair_sooner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ai_marking_fair f SET due_at = NULL, joins = f.joins + 1
    WHERE f.pool = NEW.pool AND f.priority = NEW.priority
      AND f.group_key = coalesce(NEW.group_key, NEW.assignment_id) AND f.due_at IS NOT NULL;
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER ai_marking_queue_fair_sooner
    AFTER UPDATE OF run_after ON ai_marking_queue
    FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status = 'pending'
                       AND NEW.run_after < OLD.run_after)
    EXECUTE FUNCTION aiqueue_fair_sooner();

-- What a row of an assignment is expected to use: the assignment's running
-- mean, else the mean of its pool's 20 most recently used assignments, else a
-- default (750 + 250 tokens, the 1000 of CONTRACT §8a).
CREATE OR REPLACE FUNCTION aiqueue_estimate(p_pool text, p_assignment_id text,
                                            OUT prompt_tokens float8,
                                            OUT completion_tokens float8,
                                            OUT cost_usd float8, OUT model text,
                                            OUT source text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    SELECT e.prompt_tokens, e.completion_tokens, e.cost_usd, e.model, 'assignment'
    INTO prompt_tokens, completion_tokens, cost_usd, model, source
    FROM ai_marking_estimates e WHERE e.pool = p_pool AND e.assignment_id = p_assignment_id;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT avg(r.prompt_tokens), avg(r.completion_tokens), avg(r.cost_usd),
           (array_agg(r.model ORDER BY r.updated_at DESC))[1], 'pool'
    INTO prompt_tokens, completion_tokens, cost_usd, model, source
    FROM (SELECT e.* FROM ai_marking_estimates e WHERE e.pool = p_pool
          ORDER BY e.updated_at DESC LIMIT 20) r
    HAVING count(*) > 0;
    IF FOUND THEN
        RETURN;
    END IF;
    prompt_tokens := 750;
    completion_tokens := 250;
    source := 'default';
END
$$;

-- Tokens priced at a pool's price for the model, else its most expensive
-- known price ("top"); NULL when the pool knows no price.
CREATE OR REPLACE FUNCTION aiqueue_price_usd(money jsonb, p_pool text, p_model text,
                                             prompt float8, completion float8)
RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
    SELECT (prompt * (x.pr ->> 0)::float8 + completion * (x.pr ->> 1)::float8) / 1e6
    FROM (SELECT coalesce(money -> p_pool -> 'prices' -> p_model,
                          money -> p_pool -> 'top') AS pr) x
    WHERE jsonb_typeof(x.pr) = 'array'
$$;

-- Whether a pool's money plan sets any cap.
CREATE OR REPLACE FUNCTION aiqueue_spend_capped(spec jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(jsonb_typeof(spec -> 'group_usd_per_hour') = 'number'
                    OR jsonb_typeof(spec -> 'group_usd_per_day') = 'number'
                    OR jsonb_typeof(spec -> 'pool_usd_per_day') = 'number', false)
$$;

-- The UTC clock window of `len` seconds that holds `at` (an hour, a day).
CREATE OR REPLACE FUNCTION aiqueue_window_start(len float8, at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_timestamp(floor(extract(epoch FROM at) / len) * len)
$$;

-- A group's and its pool's spend in the windows that hold now.
CREATE OR REPLACE FUNCTION aiqueue_spend_now(spec jsonb, p_pool text, p_group text,
                                             OUT group_hour float8, OUT group_day float8,
                                             OUT pool_day float8, OUT hour_ends timestamptz,
                                             OUT day_ends timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    hour_len float8 := coalesce((spec ->> 'hour_seconds')::float8, 3600);
    day_len float8 := coalesce((spec ->> 'day_seconds')::float8, 86400);
    hour_at timestamptz := aiqueue_window_start(hour_len, now());
    day_at timestamptz := aiqueue_window_start(day_len, now());
BEGIN
    hour_ends := hour_at + make_interval(secs => hour_len);
    day_ends := day_at + make_interval(secs => day_len);
    SELECT coalesce(sum(s.usd) FILTER (WHERE s.group_key = p_group AND s.span = 'hour'), 0),
           coalesce(sum(s.usd) FILTER (WHERE s.group_key = p_group AND s.span = 'day'), 0),
           coalesce(sum(s.usd) FILTER (WHERE s.group_key = '' AND s.span = 'day'), 0)
    INTO group_hour, group_day, pool_day
    FROM ai_marking_spend s
    WHERE s.pool = p_pool AND s.group_key IN (p_group, '')
      AND ((s.span = 'hour' AND s.starts_at = hour_at) OR (s.span = 'day' AND s.starts_at = day_at));
END
$$;

-- Which cap stops a group's next dispatch now, and until when its window
-- rolls over; NULL: none.  A dispatch goes while the spend is under the cap,
-- so a window overshoots by at most what its dispatches in flight cost.
CREATE OR REPLACE FUNCTION aiqueue_spend_stop(spec jsonb, p_pool text, p_group text,
                                              OUT cap text, OUT until timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    s record;
BEGIN
    IF NOT aiqueue_spend_capped(spec) THEN
        RETURN;
    END IF;
    SELECT * INTO s FROM aiqueue_spend_now(spec, p_pool, p_group);
    IF s.pool_day >= (spec ->> 'pool_usd_per_day')::float8 THEN
        cap := 'pool_usd_per_day';
        until := s.day_ends;
    ELSIF s.group_day >= (spec ->> 'group_usd_per_day')::float8 THEN
        cap := 'group_usd_per_day';
        until := s.day_ends;
    ELSIF s.group_hour >= (spec ->> 'group_usd_per_hour')::float8 THEN
        cap := 'group_usd_per_hour';
        until := s.hour_ends;
    END IF;
END
$$;

-- A dispatch's estimated cost, into the windows that hold `at`.
CREATE OR REPLACE FUNCTION aiqueue_spend_add(spec jsonb, p_pool text, p_group text,
                                             usd float8, at timestamptz) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO ai_marking_spend AS s (pool, group_key, span, starts_at, usd)
    SELECT p_pool, w.grp, w.span,
           aiqueue_window_start(coalesce((spec ->> (w.span || '_seconds'))::float8, w.len), at),
           usd
    FROM (VALUES (p_group, 'hour', 3600::float8), (p_group, 'day', 86400::float8),
                 ('', 'day', 86400::float8)) w (grp, span, len)
    ORDER BY 2, 3
    ON CONFLICT (pool, group_key, span, starts_at) DO UPDATE SET usd = s.usd + EXCLUDED.usd
$$;

-- A result's cost corrects (or a refusal gives back) a dispatch's charge in
-- the windows it went to: the latest of each that started by then.
CREATE OR REPLACE FUNCTION aiqueue_spend_correct(p_pool text, p_group text, delta float8,
                                                 at timestamptz) RETURNS void
LANGUAGE sql AS $$
    UPDATE ai_marking_spend s SET usd = greatest(s.usd + delta, 0)
    FROM (SELECT DISTINCT ON (w.group_key, w.span) w.group_key, w.span, w.starts_at
          FROM ai_marking_spend w
          WHERE w.pool = p_pool AND w.group_key IN (p_group, '') AND w.starts_at <= at
          ORDER BY w.group_key, w.span, w.starts_at DESC) w
    WHERE s.pool = p_pool AND s.group_key = w.group_key AND s.span = w.span
      AND s.starts_at = w.starts_at
      AND (w.group_key = p_group OR w.span = 'day')
$$;

-- A group reached a spend cap: its rows wait until `until`.  The live pages
-- hear of it once per pause: one `pending` event per assignment, listing the
-- group's pending rows, with why and until when.
CREATE OR REPLACE FUNCTION aiqueue_spend_pause_group(p_pool text, p_group text,
                                                     until timestamptz, cap text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ai_marking_fair f SET capped_until = until, capped_by = cap
    WHERE f.pool = p_pool AND f.group_key = p_group
      AND f.capped_until IS DISTINCT FROM until;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO ai_marking_events (assignment_id, status, queue_ids, submission_ids, summary)
    SELECT q.assignment_id, 'pending', array_agg(q.queue_id), array_agg(q.submission_id),
           jsonb_build_object('waiting_for', 'spend_cap', 'resumes_at', until,
                              'paused_by', cap)
    FROM ai_marking_queue q
    WHERE q.status = 'pending' AND q.pool = p_pool
      AND coalesce(q.group_key, q.assignment_id) = p_group
    GROUP BY q.assignment_id;
    PERFORM aiqueue_notify();
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
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN kinds IS NOT NULL THEN coalesce(
        (SELECT array_agg(DISTINCT k.pool)
         FROM jsonb_to_recordset(plan -> 'kinds') AS k (name text, pool text)
         WHERE k.name = ANY (kinds)),
        ARRAY['default']) END
$$;

DROP FUNCTION IF EXISTS aiqueue_group_head(text, integer, text, text[]);

-- Is a row of `kinds` due now, other than `except_id`, in a group that is
-- neither paused at a spend cap nor known to wait for later?  The claim's
-- `more` and can_claim (aiqueue 0023): the waiting groups, one probe each per
-- kind, instead of a walk of the claim index past every row not due yet, of
-- a kind without room, or of a paused group.
DROP FUNCTION IF EXISTS aiqueue_due_exists(text[], jsonb, uuid);
CREATE OR REPLACE FUNCTION aiqueue_due_exists(kinds text[], plan jsonb, except_id uuid)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- LATERAL ... LIMIT 1: a probe per group and kind, never a semi-join
    -- that would read every pending row first.
    RETURN (SELECT EXISTS (
        SELECT 1 FROM ai_marking_fair f CROSS JOIN unnest(kinds) k (kind)
        CROSS JOIN LATERAL (
            SELECT 1 FROM ai_marking_queue q
            WHERE q.status = 'pending' AND q.pool = f.pool AND q.priority = f.priority
              AND coalesce(q.group_key, q.assignment_id) = f.group_key
              AND q.kind = k.kind AND q.run_after <= now() AND aiqueue_unexpired(q.expires_at)
              AND q.queue_id IS DISTINCT FROM except_id
            LIMIT 1) due
        WHERE f.waiting AND (f.capped_until IS NULL OR f.capped_until <= now())
          AND (f.due_at IS NULL OR f.due_at <= now())
          AND f.pool = ANY (aiqueue_kinds_pools(kinds, plan))));
END
$$;

-- The claim's choice (inside its advisory lock): the first due row of the
-- waiting group with the smallest counter, priority first, turns by rows
-- breaking ties; groups at a spend cap are stepped over.  It charges the
-- group (counter; spend while the pool has a cap) and returns the charge,
-- which the claim writes on the row.  One walk of ai_marking_fair_walk_idx;
-- one probe of ai_marking_queue_group_idx per group it looks at.
-- `kinds`: the kinds with room (NULL: any); a group is walked only in a pool
-- that has one (`plan`: the pools and kinds), and its first due row of one of
-- them is taken.
DROP FUNCTION IF EXISTS aiqueue_fair_pick(text[], jsonb);
CREATE OR REPLACE FUNCTION aiqueue_fair_pick(kinds text[], plan jsonb, money jsonb,
                                             OUT queue_id uuid, OUT tokens float8,
                                             OUT usd float8)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    g record;
    r record;
    e record;
    stop record;
    spec jsonb;
    nxt record;
    head uuid;
    held boolean;
    -- A declared cursor is planned for its first rows (cursor_tuple_fraction):
    -- the walk index in order, where a plain FOR query would sort every
    -- waiting group first.
    walk CURSOR (p_pools text[]) FOR
        SELECT f.pool, f.priority, f.group_key, f.joins FROM ai_marking_fair f
        WHERE f.waiting AND (f.capped_until IS NULL OR f.capped_until <= now())
          AND (f.due_at IS NULL OR f.due_at <= now())
          AND (p_pools IS NULL OR f.pool = ANY (p_pools))
        ORDER BY f.priority DESC, f.counter, f.head_turn, f.head_seq;
BEGIN
    FOR g IN walk(aiqueue_kinds_pools(kinds, plan)) LOOP
        spec := money -> g.pool;
        IF aiqueue_spend_capped(spec) THEN
            SELECT * INTO stop FROM aiqueue_spend_stop(spec, g.pool, g.group_key);
            IF stop.until IS NOT NULL THEN
                PERFORM aiqueue_spend_pause_group(g.pool, g.group_key, stop.until, stop.cap);
                CONTINUE;
            END IF;
        END IF;
        -- The group's first due row of a kind with room (one probe per kind),
        -- then its lock; SKIP LOCKED steps over a row a webhook or the
        -- recovery holds right now, and only then is the group walked in turn
        -- order (as it always is when any kind will do).
        -- (aiqueue 0023: one probe of ai_marking_queue_group_kind_idx per kind
        -- with room, so a kind at its cap is never walked; before, its rows
        -- were read one by one from the heap to learn their kind.)
        held := false;
        IF kinds IS NOT NULL THEN
            SELECT c.queue_id INTO head FROM unnest(kinds) k (kind)
            CROSS JOIN LATERAL (
                SELECT h.queue_id, h.turn, h.seq FROM ai_marking_queue h
                WHERE h.status = 'pending' AND h.pool = g.pool AND h.priority = g.priority
                  AND coalesce(h.group_key, h.assignment_id) = g.group_key
                  AND h.kind = k.kind AND h.run_after <= now()
                  AND aiqueue_unexpired(h.expires_at)
                ORDER BY h.turn, h.seq LIMIT 1) c
            ORDER BY c.turn, c.seq LIMIT 1;
            SELECT NULL::uuid AS queue_id, NULL::text AS assignment_id INTO r;
            IF head IS NOT NULL THEN
                SELECT q.queue_id, q.assignment_id INTO r FROM ai_marking_queue q
                WHERE q.queue_id = head AND q.status = 'pending'
                FOR UPDATE SKIP LOCKED;
                held := NOT FOUND;
            END IF;
        END IF;
        IF kinds IS NULL OR held THEN
            SELECT q.queue_id, q.assignment_id INTO r FROM ai_marking_queue q
            WHERE q.status = 'pending' AND q.pool = g.pool AND q.priority = g.priority
              AND coalesce(q.group_key, q.assignment_id) = g.group_key
              AND q.run_after <= now() AND (kinds IS NULL OR q.kind = ANY (kinds))
              -- Never an expired row, even before the sweep has ended it (§9d); a
              -- not_before is the row's first run_after, so the test above holds it.
              AND aiqueue_unexpired(q.expires_at)
            ORDER BY q.turn, q.seq LIMIT 1
            FOR UPDATE SKIP LOCKED;
        END IF;
        IF r.queue_id IS NULL THEN
            -- No due row: a group whose rows all went (cancelled, erased) stops
            -- waiting, unless rows joined since the walk looked.
            UPDATE ai_marking_fair f SET waiting = false
            WHERE f.pool = g.pool AND f.priority = g.priority AND f.group_key = g.group_key
              AND f.joins = g.joins
              AND NOT EXISTS (SELECT 1 FROM ai_marking_queue q
                              WHERE q.status = 'pending' AND q.pool = g.pool
                                AND q.priority = g.priority
                                AND coalesce(q.group_key, q.assignment_id) = g.group_key);
            -- Its rows wait for later (scheduled, on the batch lane, backing
            -- off), not only for room: walks step over the group until its
            -- first comes due (aiqueue 0023).  Rows joining or made due sooner
            -- forget it.  (A due row of a kind without room stops the test at
            -- once; a group waiting for later is read twice, once.)
            IF NOT FOUND AND NOT EXISTS (
                SELECT 1 FROM ai_marking_queue q
                WHERE q.status = 'pending' AND q.pool = g.pool AND q.priority = g.priority
                  AND coalesce(q.group_key, q.assignment_id) = g.group_key
                  AND q.run_after <= now()) THEN
                UPDATE ai_marking_fair f SET due_at = m.at
                FROM (SELECT min(q.run_after) AS at FROM ai_marking_queue q
                      WHERE q.status = 'pending' AND q.pool = g.pool
                        AND q.priority = g.priority
                        AND coalesce(q.group_key, q.assignment_id) = g.group_key) m
                WHERE f.pool = g.pool AND f.priority = g.priority
                  AND f.group_key = g.group_key AND f.joins = g.joins AND m.at > now();
            END IF;
            CONTINUE;
        END IF;
        SELECT * INTO e FROM aiqueue_estimate(g.pool, r.assignment_id);
        tokens := aiqueue_fair_weight(e.prompt_tokens, e.completion_tokens);
        IF aiqueue_spend_capped(spec) THEN
            usd := coalesce(e.cost_usd, aiqueue_price_usd(money, g.pool, e.model,
                                                          e.prompt_tokens, e.completion_tokens));
            PERFORM aiqueue_spend_add(spec, g.pool, g.group_key, usd, now());
        END IF;
        SELECT q.turn, q.seq INTO nxt FROM ai_marking_queue q
        WHERE q.status = 'pending' AND q.pool = g.pool AND q.priority = g.priority
          AND coalesce(q.group_key, q.assignment_id) = g.group_key AND q.queue_id <> r.queue_id
        ORDER BY q.turn, q.seq LIMIT 1;
        -- Its last row: the group stops waiting, unless rows joined since the
        -- walk looked (a concurrent enqueue's trigger bumped `joins`; on its
        -- commit this UPDATE re-reads the row and keeps it waiting).
        UPDATE ai_marking_fair f
        SET counter = f.counter + tokens, head_turn = coalesce(nxt.turn, f.head_turn),
            head_seq = coalesce(nxt.seq, f.head_seq),
            waiting = nxt.turn IS NOT NULL OR f.joins <> g.joins, updated_at = now()
        WHERE f.pool = g.pool AND f.priority = g.priority AND f.group_key = g.group_key;
        queue_id := r.queue_id;
        RETURN;
    END LOOP;
END
$$;

-- A result's usage: the assignment's estimate learns it (a running mean over
-- about its last 20 rows), and it corrects what the row's current dispatch
-- charged: the group's counter by the weighted tokens, the spend windows by
-- the cost (the function's, else priced; unknown: the charge stands).  A
-- group whose spend went down may dispatch again at once (the claim re-reads
-- the windows).  A result without token counts changes nothing.
CREATE OR REPLACE FUNCTION aiqueue_money_result(p_queue_id uuid, p_dispatch_seq integer,
                                                p_usage jsonb, money jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    prompt float8 := aiqueue_usage_int(p_usage -> 'prompt_tokens');
    completion float8 := aiqueue_usage_int(p_usage -> 'completion_tokens');
    model text := p_usage ->> 'model';
    cost float8;
BEGIN
    IF prompt IS NULL AND completion IS NULL THEN
        RETURN;
    END IF;
    prompt := coalesce(prompt, 0);
    completion := coalesce(completion, 0);
    SELECT q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS grp, q.assignment_id,
           q.dispatch_seq, q.charged_tokens, q.charged_usd, q.charged_at
    INTO r FROM ai_marking_queue q WHERE q.queue_id = p_queue_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    cost := CASE WHEN jsonb_typeof(p_usage -> 'cost_usd') = 'number'
                 THEN (p_usage ->> 'cost_usd')::float8
                 ELSE aiqueue_price_usd(money, r.pool, model, prompt, completion) END;
    INSERT INTO ai_marking_estimates AS e (pool, assignment_id, prompt_tokens,
                                           completion_tokens, cost_usd, model, samples)
    VALUES (r.pool, r.assignment_id, prompt, completion, cost, model, 1)
    ON CONFLICT (pool, assignment_id) DO UPDATE
    SET prompt_tokens = e.prompt_tokens
                        + (EXCLUDED.prompt_tokens - e.prompt_tokens) / least(e.samples + 1, 20),
        completion_tokens = e.completion_tokens + (EXCLUDED.completion_tokens
                                                   - e.completion_tokens)
                                                  / least(e.samples + 1, 20),
        cost_usd = CASE WHEN EXCLUDED.cost_usd IS NULL OR e.cost_usd IS NULL
                        THEN coalesce(EXCLUDED.cost_usd, e.cost_usd)
                        ELSE e.cost_usd + (EXCLUDED.cost_usd - e.cost_usd)
                                          / least(e.samples + 1, 20) END,
        model = coalesce(EXCLUDED.model, e.model),
        samples = e.samples + 1, updated_at = now();
    -- A late result of an earlier dispatch: the row's charge is the current
    -- dispatch's, which its own result corrects.
    IF r.dispatch_seq <> p_dispatch_seq OR r.charged_tokens IS NULL THEN
        RETURN;
    END IF;
    -- The counter alone is one row, safe to wait for; with the spend windows
    -- too, the claim's lock first, so they are locked in the claim's order
    -- (aiqueue 0023: a completion no longer holds it from its row's end).
    IF r.charged_usd IS NOT NULL AND cost IS NOT NULL AND cost <> r.charged_usd THEN
        PERFORM aiqueue_claim_lock();
    END IF;
    UPDATE ai_marking_fair f
    SET counter = f.counter + aiqueue_fair_weight(prompt, completion) - r.charged_tokens
    WHERE f.pool = r.pool AND f.priority = r.priority AND f.group_key = r.grp;
    IF r.charged_usd IS NOT NULL AND cost IS NOT NULL AND cost <> r.charged_usd THEN
        PERFORM aiqueue_spend_correct(r.pool, r.grp, cost - r.charged_usd, r.charged_at);
        IF cost < r.charged_usd THEN
            UPDATE ai_marking_fair f SET capped_until = NULL, capped_by = NULL
            WHERE f.pool = r.pool AND f.group_key = r.grp AND f.capped_until IS NOT NULL;
        END IF;
    END IF;
END
$$;

-- What a dispatch (or a pack) charged a group is given back: its turn counter,
-- and its spend windows when money was charged. Counter and spend windows are
-- the claim's rows too: a caller that gives money back holds the claim's lock
-- first, so they are locked in its order (aiqueue 0023).
CREATE OR REPLACE FUNCTION aiqueue_uncharge(p_pool text, p_priority integer, p_group text,
                                            p_tokens float8, p_usd float8,
                                            p_charged_at timestamptz, p_ids uuid[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ai_marking_fair f SET counter = f.counter - p_tokens
    WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group;
    IF p_usd IS NOT NULL THEN
        PERFORM aiqueue_spend_correct(p_pool, p_group, -p_usd, p_charged_at);
        UPDATE ai_marking_fair f SET capped_until = NULL, capped_by = NULL
        WHERE f.pool = p_pool AND f.group_key = p_group AND f.capped_until IS NOT NULL;
    END IF;
    UPDATE ai_marking_queue q SET charged_tokens = NULL, charged_usd = NULL
    WHERE q.queue_id = ANY (p_ids);
END
$$;

-- A refused dispatch used no tokens: its charge is given back.
CREATE OR REPLACE FUNCTION aiqueue_money_refund(p_queue_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    SELECT q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS grp,
           q.charged_tokens, q.charged_usd, q.charged_at
    INTO r FROM ai_marking_queue q WHERE q.queue_id = p_queue_id;
    IF NOT FOUND OR r.charged_tokens IS NULL THEN
        RETURN;
    END IF;
    IF r.charged_usd IS NOT NULL THEN
        PERFORM aiqueue_claim_lock();
    END IF;
    PERFORM aiqueue_uncharge(r.pool, r.priority, r.grp, r.charged_tokens, r.charged_usd,
                             r.charged_at, ARRAY[p_queue_id]);
END
$$;

-- The overnight lane (§9f) packs rows into a provider batch: each is charged
-- like a dispatch, to its group's counter (its estimated weighted tokens) and,
-- where its pool has a cap, to the spend windows, at the pool's batch prices
-- (`money` -> pool -> 'batch_prices' / 'batch_top': declared, else half of
-- live; an estimate without a known price: half its recorded cost).  The
-- result's usage (priced at the batch price by the lane) corrects the charge
-- as for a live result (aiqueue_money_result).
-- Tokens priced at a pool's batch prices (declared, else half of live), else
-- half of `recorded` (a cost the function reported); NULL: nothing known.
CREATE OR REPLACE FUNCTION aiqueue_batch_price_usd(money jsonb, p_pool text, p_model text,
                                                   prompt float8, completion float8,
                                                   recorded float8)
RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(
        aiqueue_price_usd(jsonb_build_object(p_pool, jsonb_build_object(
                              'prices', money -> p_pool -> 'batch_prices',
                              'top', money -> p_pool -> 'batch_top')),
                          p_pool, p_model, prompt, completion),
        recorded * 0.5)
$$;

CREATE OR REPLACE FUNCTION aiqueue_batch_charge(p_batch bigint, money jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    -- Counters and spend windows (the pool's day among them) are the claim's rows
    -- too: its lock first, so they are locked in its order (aiqueue 0023).
    PERFORM aiqueue_claim_lock();
    -- One group at a time, in key order, as the claim and the enqueue lock groups.
    FOR c IN
        SELECT r.pool, r.priority, r.grp, sum(r.tokens) AS tokens, sum(r.usd) AS usd,
               array_agg(r.queue_id) AS ids, array_agg(r.tokens) AS each_tokens,
               array_agg(r.usd) AS each_usd
        FROM (SELECT q.queue_id, q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS grp,
                     aiqueue_fair_weight(e.prompt_tokens, e.completion_tokens) AS tokens,
                     CASE WHEN aiqueue_spend_capped(money -> q.pool) THEN
                         aiqueue_batch_price_usd(money, q.pool, e.model, e.prompt_tokens,
                                                 e.completion_tokens, e.cost_usd) END AS usd
              FROM ai_marking_queue q
              CROSS JOIN LATERAL aiqueue_estimate(q.pool, q.assignment_id) e
              WHERE q.batch_id = p_batch AND q.status = 'processing') r
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    LOOP
        UPDATE ai_marking_fair f SET counter = f.counter + c.tokens, updated_at = now()
        WHERE f.pool = c.pool AND f.priority = c.priority AND f.group_key = c.grp;
        IF c.usd IS NOT NULL THEN
            PERFORM aiqueue_spend_add(money -> c.pool, c.pool, c.grp, c.usd, now());
        END IF;
        UPDATE ai_marking_queue q SET charged_tokens = x.tokens, charged_usd = x.usd,
                                      charged_at = now()
        FROM unnest(c.ids, c.each_tokens, c.each_usd) AS x (queue_id, tokens, usd)
        WHERE q.queue_id = x.queue_id;
    END LOOP;
END
$$;

-- Rows leave batch `p_batch` unpaid (`p_ids`; NULL: all it still holds): what
-- packing charged them is given back, one group at a time (aiqueue_uncharge, as
-- for one refused row), so that a batch of thousands is one short statement.
CREATE OR REPLACE FUNCTION aiqueue_batch_refund(p_batch bigint, p_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    IF EXISTS (SELECT FROM ai_marking_queue q
               WHERE q.batch_id = p_batch AND q.status = 'processing'
                 AND q.charged_usd IS NOT NULL) THEN
        PERFORM aiqueue_claim_lock();
    END IF;
    FOR c IN
        SELECT q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS grp,
               sum(q.charged_tokens) AS tokens, sum(q.charged_usd) AS usd,
               min(q.charged_at) AS charged_at, array_agg(q.queue_id) AS ids
        FROM ai_marking_queue q
        WHERE q.batch_id = p_batch AND q.status = 'processing' AND q.charged_tokens IS NOT NULL
          AND (p_ids IS NULL OR q.queue_id = ANY (p_ids))
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    LOOP
        PERFORM aiqueue_uncharge(c.pool, c.priority, c.grp, c.tokens, c.usd, c.charged_at,
                                 c.ids);
    END LOOP;
END
$$;

-- When a pending row of a group at a spend cap goes on (NULL: it is not paused).
CREATE OR REPLACE FUNCTION aiqueue_spend_resumes_at(p_status text, p_pool text,
                                                    p_priority integer, p_group text)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT f.capped_until FROM ai_marking_fair f
    WHERE p_status = 'pending' AND f.pool = p_pool AND f.priority = p_priority
      AND f.group_key = p_group AND f.capped_until > now()
$$;

-- The same, with the cap that paused it (the pages say which window).
CREATE OR REPLACE FUNCTION aiqueue_spend_pause(p_status text, p_pool text, p_priority integer,
                                               p_group text, OUT until timestamptz,
                                               OUT cap text)
LANGUAGE sql STABLE AS $$
    SELECT f.capped_until, f.capped_by FROM ai_marking_fair f
    WHERE p_status = 'pending' AND f.pool = p_pool AND f.priority = p_priority
      AND f.group_key = p_group AND f.capped_until > now()
$$;

-- When the first pending row comes due (the ticker's sleep): its run_after,
-- unless its group is paused at a spend cap, whose rows come due when its
-- window rolls over.  With no group paused (the common case) this is the
-- index-only min(run_after) it always was.
DROP FUNCTION IF EXISTS aiqueue_due_at();
CREATE OR REPLACE FUNCTION aiqueue_due_at(kinds text[]) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    resumes timestamptz;
    due timestamptz;
BEGIN
    SELECT min(f.capped_until) INTO resumes FROM ai_marking_fair f
    WHERE f.waiting AND f.capped_until > now();
    IF resumes IS NULL THEN
        SELECT min(q.run_after) INTO due FROM ai_marking_queue q
        WHERE q.status = 'pending' AND q.kind = ANY (kinds);
        RETURN due;
    END IF;
    SELECT min(q.run_after) INTO due FROM ai_marking_queue q
    WHERE q.status = 'pending' AND q.kind = ANY (kinds)
      AND NOT EXISTS (SELECT 1 FROM ai_marking_fair f
                      WHERE f.pool = q.pool AND f.priority = q.priority
                        AND f.group_key = coalesce(q.group_key, q.assignment_id)
                        AND f.capped_until > now());
    -- Only the paused groups of these kinds' pools.
    RETURN least(due, (SELECT min(f.capped_until) FROM ai_marking_fair f
                       WHERE f.waiting AND f.capped_until > now()
                         AND EXISTS (SELECT 1 FROM ai_marking_queue q
                                     WHERE q.status = 'pending' AND q.pool = f.pool
                                       AND q.priority = f.priority AND q.kind = ANY (kinds)
                                       AND coalesce(q.group_key, q.assignment_id)
                                           = f.group_key)));
END
$$;

-- A completed result, then the next claim, in one transaction.  The claim runs
-- whether or not the result was new: the gate decides whether a slot is free
-- (a late result's duplicate may find one).  Always exactly one row: `applied`,
-- and the claimed job's columns (NULL when nothing was claimed).  Locks: the
-- completion holds its row while the claim waits for the advisory lock, whose
-- holder never waits for a row lock (SKIP LOCKED), so this cannot deadlock.
-- A new result also raises the learned limit L (aiqueue_flow_result) before
-- the claim reads it.
--
-- A lost commit answer (CONTRACT §9a): the result's dispatch line keeps the
-- row this settle claimed (next_queue_id, next_seq).  When the same result
-- comes again (the answer was lost, and the store or the webhook retried)
-- and that row is still processing with nobody having taken it to send
-- (sent_at, set by aiqueue_take_handoff), it is handed back instead of a
-- second row being claimed: nothing is applied twice and no claimed row is
-- left without a dispatch.  Whoever takes a handed row first sends it.
-- The handed-back row was charged (turns, spend) by the settle that claimed it.
DROP FUNCTION IF EXISTS aiqueue_settle(uuid, jsonb, jsonb, integer, integer, integer, integer,
                                       integer, float8);
CREATE OR REPLACE FUNCTION aiqueue_settle(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                               p_dispatch_seq integer, cap integer,
                               breaker_threshold integer, tpm integer DEFAULT 0,
                               rpm integer DEFAULT 0, budget_window float8 DEFAULT 60,
                               plan jsonb DEFAULT NULL, money jsonb DEFAULT NULL)
RETURNS TABLE (applied boolean, queue_id uuid, submission_id uuid, assignment_id text,
               attempts integer, dispatch_seq integer, payload text, content text,
               more boolean, breaker_dirty boolean, kind text, pool text)
LANGUAGE plpgsql AS $$
BEGIN
    -- The claim lock from the end on (aiqueue 0023): the outbox test takes it
    -- rather than pinning a row, and the charges below are written under it,
    -- in the claim's order (see aiqueue_outbox_run_finished).
    PERFORM set_config('aiqueue.end_lock', 'on', true);
    applied := aiqueue_complete(p_queue_id, p_result, p_usage, p_dispatch_seq);
    PERFORM set_config('aiqueue.end_lock', 'off', true);
    IF applied THEN
        PERFORM aiqueue_claim_lock();
        PERFORM aiqueue_flow_result(p_queue_id, p_dispatch_seq, p_usage, cap,
                                    tpm > 0 OR rpm > 0 OR aiqueue_plan_budgeted(plan), plan);
        PERFORM aiqueue_money_result(p_queue_id, p_dispatch_seq, p_usage, money);
    ELSE
        SELECT h.* INTO queue_id, submission_id, assignment_id, attempts, dispatch_seq,
                        payload, content, more, breaker_dirty, kind, pool
        FROM aiqueue_handback(p_queue_id, p_dispatch_seq) h;
        IF FOUND THEN
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    SELECT c.* INTO queue_id, submission_id, assignment_id, attempts, dispatch_seq,
                    payload, content, more, breaker_dirty, kind, pool
    FROM aiqueue_claim(cap, breaker_threshold, tpm, rpm, budget_window, plan, money) c;
    IF FOUND THEN
        UPDATE ai_marking_attempts a
        SET next_queue_id = aiqueue_settle.queue_id, next_seq = aiqueue_settle.dispatch_seq
        WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq
          AND a.kind = 'dispatch';
    END IF;
    RETURN NEXT;
END
$$;

-- The row a first settle of this result claimed, when it is still processing
-- under that claim and nobody has taken it to send (see aiqueue_settle).
-- `more` is false: the repeat only gives back what the first settle took.
-- Its row type grew kind and pool (aiqueue 0019): replaced, not altered.
DROP FUNCTION IF EXISTS aiqueue_handback(uuid, integer);
CREATE OR REPLACE FUNCTION aiqueue_handback(p_queue_id uuid, p_dispatch_seq integer)
RETURNS TABLE (queue_id uuid, submission_id uuid, assignment_id text, attempts integer,
               dispatch_seq integer, payload text, content text, more boolean,
               breaker_dirty boolean, kind text, pool text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT q.queue_id, q.submission_id, q.assignment_id, q.attempts, q.dispatch_seq,
           coalesce(pl.payload, '{}'::jsonb)::text, s.content, false,
           c.consecutive_failures > 0 OR c.circuit_open_until IS NOT NULL,
           q.kind, q.pool
    FROM ai_marking_attempts a
    JOIN ai_marking_queue q ON q.queue_id = a.next_queue_id AND q.dispatch_seq = a.next_seq
    JOIN ai_marking_attempts n ON n.queue_id = q.queue_id AND n.dispatch_seq = q.dispatch_seq
                              AND n.kind = 'dispatch'
    JOIN submissions s ON s.id = q.submission_id
    LEFT JOIN ai_marking_payloads pl ON pl.id = q.payload_id
    -- The breaker of the row's own pool (one control row per pool, aiqueue 0019).
    JOIN ai_queue_control c ON c.pool = q.pool
    WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq AND a.kind = 'dispatch'
      AND q.status = 'processing' AND n.sent_at IS NULL
    LIMIT 1;
END
$$;

-- Take a claimed row to send it: true for the first taker only, so a row a
-- repeated settle handed back is never sent twice.
CREATE OR REPLACE FUNCTION aiqueue_take_handoff(p_queue_id uuid, p_dispatch_seq integer)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ai_marking_attempts a SET sent_at = now()
    WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq
      AND a.kind = 'dispatch' AND a.sent_at IS NULL;
    RETURN FOUND;
END
$$;

-- Wake live-event listeners, if any instance has one.  NOTIFY folds identical
-- notifications of one transaction into one.
CREATE OR REPLACE FUNCTION aiqueue_notify() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ai_queue_control c WHERE c.id = 1 AND c.listened_until > now()) THEN
        PERFORM pg_notify('ai_marking', '');
    END IF;
END
$$;

-- A status change is one row on the hot path: its event (live UIs), its count
-- deltas (stats) and the wake-up of listeners, in one trigger call.
CREATE OR REPLACE FUNCTION aiqueue_record_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, summary)
    VALUES (NEW.assignment_id, NEW.queue_id, NEW.submission_id, NEW.status,
            CASE WHEN NEW.status = 'completed' THEN (
                SELECT jsonb_strip_nulls(jsonb_build_object(
                    'score', s.ai_result -> 'score', 'max_score', s.ai_result -> 'max_score'))
                FROM submissions s WHERE s.id = NEW.submission_id) END);
    INSERT INTO ai_marking_counts (status, kind, pool, n)
    VALUES (OLD.status, OLD.kind, OLD.pool, -1), (NEW.status, NEW.kind, NEW.pool, 1);
    PERFORM aiqueue_notify();
    RETURN NULL;
END
$$;

-- An enqueue's rows: one batch row per assignment and status (migration 0009).
-- Both arrays aggregate the same stream of rows, so they stay aligned; their
-- order is the group's, not the enqueue's (sorting them by seq cost 11 ms of
-- 10,000 rows, and the rows' events share one transaction anyway).
CREATE OR REPLACE FUNCTION aiqueue_record_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_events (assignment_id, status, queue_ids, submission_ids)
    SELECT assignment_id, status, array_agg(queue_id), array_agg(submission_id)
    FROM new_rows GROUP BY assignment_id, status;
    PERFORM aiqueue_notify();
    RETURN NULL;
END
$$;

-- Bulk statements (an enqueue, a prune, a cascade from submissions) add one
-- grouped delta per status; a single status change (the hot path) is a
-- row-level trigger, filtered by WHEN, whose plan plpgsql caches.
CREATE OR REPLACE FUNCTION aiqueue_count_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ai_marking_counts (status, kind, pool, n)
        SELECT status, kind, pool, count(*) FROM new_rows GROUP BY status, kind, pool;
    ELSE
        INSERT INTO ai_marking_counts (status, kind, pool, n)
        SELECT status, kind, pool, -count(*) FROM old_rows GROUP BY status, kind, pool;
    END IF;
    RETURN NULL;
END
$$;

-- The change feed and the per-status count deltas, bound to the queue table.
-- An enqueue inserts thousands of rows at once: statement-level triggers with
-- transition tables.  A status change is one row on the hot path: a row-level
-- trigger, filtered by WHEN before any function call.
CREATE OR REPLACE TRIGGER ai_marking_queue_events_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_record_inserts();
-- A statement that moves many rows at once and records them itself (a replay
-- of 10,000 failed rows: aiqueue_retry) sets aiqueue.bulk_move for its own
-- duration; the row trigger then stays out (it was 40 % of such a replay).
CREATE OR REPLACE TRIGGER ai_marking_queue_events_upd
    AFTER UPDATE OF status ON ai_marking_queue
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       AND current_setting('aiqueue.bulk_move', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION aiqueue_record_move();
CREATE OR REPLACE TRIGGER ai_marking_queue_counts_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_count_changes();
CREATE OR REPLACE TRIGGER ai_marking_queue_counts_del
    AFTER DELETE ON ai_marking_queue REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_count_changes();

-- A review action on one applied result, in the row's history (while the queue
-- still has the row) and in the live feed (the page updates its mark).
CREATE OR REPLACE FUNCTION aiqueue_review_recorded(p_queue_id uuid, action text,
                                                   p_actor text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r ai_marking_results%ROWTYPE;
BEGIN
    SELECT * INTO r FROM ai_marking_results m WHERE m.queue_id = p_queue_id;
    INSERT INTO ai_marking_attempts (queue_id, kind, outcome, ended_at, actor)
    SELECT q.queue_id, 'action', action, now(), p_actor
    FROM ai_marking_queue q WHERE q.queue_id = r.queue_id;
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, summary)
    SELECT r.assignment_id, r.queue_id, r.submission_id, 'completed',
           jsonb_strip_nulls(jsonb_build_object(
               'score', s.ai_result -> 'score', 'max_score', s.ai_result -> 'max_score',
               'review', CASE action WHEN 'accept' THEN 'accepted' ELSE 'reverted' END))
    FROM submissions s WHERE s.id = r.submission_id;
    PERFORM aiqueue_notify();
END
$$;

-- Revert one applied result: the submission's mark goes back to what it was
-- before it.  Locks the submission first, as aiqueue_complete does (after the
-- queue row, which a revert never locks), so a revert and a result for the same
-- submission serialise; every statement after the lock reads what the other
-- committed.  outcome: reverted, superseded (a later result is still applied),
-- not_completed (no applied result, or reverted already) or not_found.
CREATE OR REPLACE FUNCTION aiqueue_revert(p_queue_id uuid, p_actor text)
RETURNS TABLE (outcome text, reverted_at timestamptz) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r ai_marking_results%ROWTYPE;
BEGIN
    SELECT * INTO r FROM ai_marking_results m WHERE m.queue_id = p_queue_id;
    IF NOT FOUND THEN
        outcome := CASE WHEN EXISTS (SELECT 1 FROM ai_marking_queue q
                                     WHERE q.queue_id = p_queue_id)
                        THEN 'not_completed' ELSE 'not_found' END;
        RETURN NEXT;
        RETURN;
    END IF;
    PERFORM 1 FROM submissions s WHERE s.id = r.submission_id FOR UPDATE;
    SELECT * INTO r FROM ai_marking_results m WHERE m.queue_id = p_queue_id FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'not_found';  -- its submission was deleted meanwhile
    ELSIF r.review = 'reverted' THEN
        outcome := 'not_completed';
    ELSIF EXISTS (SELECT 1 FROM ai_marking_results l
                  WHERE l.submission_id = r.submission_id AND l.seq > r.seq
                    AND l.review <> 'reverted') THEN
        outcome := 'superseded';
    ELSE
        UPDATE submissions s SET ai_result = r.previous_result,
                                 ai_marked_at = r.previous_marked_at
        WHERE s.id = r.submission_id;
        UPDATE ai_marking_results m SET review = 'reverted', reverted_at = now(),
                                        actor = p_actor
        WHERE m.queue_id = p_queue_id
        RETURNING * INTO r;
        PERFORM aiqueue_review_recorded(p_queue_id, 'revert', p_actor);
        outcome := 'reverted';
        reverted_at := r.reverted_at;
    END IF;
    RETURN NEXT;
END
$$;

-- Accept one applied result (again: a newer adjustment replaces the older one).
CREATE OR REPLACE FUNCTION aiqueue_accept(p_queue_id uuid, p_actor text, p_adjusted jsonb)
RETURNS TABLE (outcome text, accepted_at timestamptz) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r ai_marking_results%ROWTYPE;
BEGIN
    UPDATE ai_marking_results m
    SET review = 'accepted', accepted_at = now(), actor = p_actor,
        adjusted_result = coalesce(p_adjusted, m.adjusted_result)
    WHERE m.queue_id = p_queue_id AND m.review <> 'reverted'
    RETURNING * INTO r;
    IF FOUND THEN
        PERFORM aiqueue_review_recorded(p_queue_id, 'accept', p_actor);
        outcome := 'accepted';
        accepted_at := r.accepted_at;
    ELSIF EXISTS (SELECT 1 FROM ai_marking_results m WHERE m.queue_id = p_queue_id)
          OR EXISTS (SELECT 1 FROM ai_marking_queue q WHERE q.queue_id = p_queue_id) THEN
        outcome := 'not_completed';
    ELSE
        outcome := 'not_found';
    END IF;
    RETURN NEXT;
END
$$;

-- The run a review of "the assignment" means: its newest queue row's run, or
-- (queue rows pruned) its newest result's.
CREATE OR REPLACE FUNCTION aiqueue_latest_run(p_assignment_id text) RETURNS uuid
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT q.run_id FROM ai_marking_queue q WHERE q.assignment_id = p_assignment_id
         ORDER BY q.created_at DESC, q.seq DESC LIMIT 1),
        (SELECT m.run_id FROM ai_marking_results m WHERE m.assignment_id = p_assignment_id
         ORDER BY m.seq DESC LIMIT 1))
$$;

-- Accept or revert every unreviewed result of the assignment's latest run, in
-- one transaction.  Submission order keeps two concurrent run reverts from
-- locking the same submissions in opposite orders.
CREATE OR REPLACE FUNCTION aiqueue_review_run(p_assignment_id text, p_action text,
                                              p_actor text)
RETURNS TABLE (done integer, superseded integer) LANGUAGE plpgsql AS $$
DECLARE
    q uuid;
    o text;
BEGIN
    done := 0;
    superseded := 0;
    FOR q IN SELECT m.queue_id FROM ai_marking_results m
             WHERE m.run_id = aiqueue_latest_run(p_assignment_id)
               AND m.assignment_id = p_assignment_id AND m.review = 'unreviewed'
             ORDER BY m.submission_id, m.seq DESC LOOP
        IF p_action = 'accept' THEN
            SELECT a.outcome INTO o FROM aiqueue_accept(q, p_actor, NULL) a;
        ELSE
            SELECT r.outcome INTO o FROM aiqueue_revert(q, p_actor) r;
        END IF;
        IF o IN ('accepted', 'reverted') THEN
            done := done + 1;
        ELSIF o = 'superseded' THEN
            superseded := superseded + 1;
        END IF;
    END LOOP;
    RETURN NEXT;
END
$$;

-- == Notifications (CONTRACT §8d, migration 0013) ==============================
-- An event for the host app goes to ai_marking_outbox in the transaction of the
-- status change that causes it; aiqueue/notify.py delivers it later.
--
-- Why triggers: every path to `failed` (a failed attempt, stuck recovery, and
-- any path added later, such as a refusal given up) and every path that ends a
-- run (a result, a failure, a cancel of one row or of an assignment's rest, an
-- operator's action) is an UPDATE of ai_marking_queue.status.  A trigger on that
-- column can't be forgotten by the next statement that adds such a path, and
-- it runs inside that statement's transaction, so an event exists exactly when
-- its change committed.  The WHEN clause keeps every other update (claims,
-- heartbeats, retries back to pending) free of any call.
--
-- Always written, whether or not QUEUE_NOTIFY_URL is set: a flag in the
-- database set at start-up would let one instance started without the
-- variable (an old deployment still serving, a one-off command) switch events
-- off for every other one, and lose them.  The outbox is small (one row per
-- failed row and per finished run, against one change-feed row per status
-- change) and the delivery step prunes it: events nobody could deliver go
-- after the 24 h retry window, delivered and given-up ones after
-- QUEUE_PRUNE_AFTER_DAYS.

-- A run has ended when none of its rows is pending or processing: write its
-- marking.run_finished once per transaction (a cancel ends many rows at once).
-- Counts, tokens and cost over the run as GET .../progress reports them.
--
-- Two transactions ending a run's last two rows at once would each still see
-- the other's row live (READ COMMITTED) and neither would write the event.
-- Only an end that can finish the run has to be serialised against the others
-- (aiqueue 0023; before, every end took the claim's advisory lock, which every
-- claim holds too):
--   * An end that finds another row of its run processing and holds no lock
--     on it (SKIP LOCKED) pins that row (FOR SHARE) and writes nothing: the run
--     cannot finish before that row ends, and whoever ends it waits for this
--     transaction to commit, so its own test sees this end.  Only processing
--     rows are pinned: a pinned pending row would be stepped over by claims.
--   * Any other end (no such row: the run may be finishing) takes the claim's
--     advisory lock and tests again; the lock holders see each other's commits,
--     and see pinned rows live (they are).
-- Why this cannot deadlock: a pinned row's ender waits for the pinner, but
-- every statement that ends a processing row locks it first (a result, a
-- failure, a refusal) or skips it (recover_stuck: SKIP LOCKED), so it holds
-- nothing a pinner waits for.  The claim lock is still taken after row locks
-- and its holder never waits for a queue row (SKIP LOCKED); a statement that
-- writes rows the claim writes too (turn counters, spend, the budget window)
-- takes the claim lock before them (aiqueue_settle, aiqueue_flow_result,
-- aiqueue_money_result, aiqueue_money_refund), so
-- those rows are always locked in the claim's order.  `aiqueue.end_lock` = 'on'
-- says the transaction takes the claim lock right after this end anyway (a
-- settle): then the lock, not a pin.
CREATE OR REPLACE FUNCTION aiqueue_outbox_run_finished(p_run uuid, p_assignment text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    -- run id -> a row of that run this transaction found live (transaction-local,
    -- so also right through a transaction pooler).
    seen jsonb := coalesce(nullif(current_setting('aiqueue.live_witness', true), ''), '{}');
    witness uuid;
BEGIN
    -- A statement that ends many rows (a cancel of 10,000) calls this once per
    -- row, and until it commits every old row version still sits in the
    -- live-run index: looking the run up each time would cost O(n^2).  So the
    -- row found live last time is asked first (by its key), then whether the
    -- event is written already; the index is searched only when both say no.
    -- (A pinned witness stays live: nobody else can end it before we commit.)
    IF EXISTS (SELECT 1 FROM ai_marking_queue q
               WHERE q.queue_id = (seen ->> p_run::text)::uuid
                 AND q.status IN ('pending', 'processing'))
       OR EXISTS (SELECT 1 FROM ai_marking_outbox o
                  WHERE o.type = 'marking.run_finished' AND o.run_id = p_run
                    AND o.tx = pg_current_xact_id()) THEN
        RETURN;
    END IF;
    IF current_setting('aiqueue.end_lock', true) IS DISTINCT FROM 'on' THEN
        SELECT q.queue_id INTO witness FROM ai_marking_queue q
        WHERE q.run_id = p_run AND q.status = 'processing'
        LIMIT 1
        FOR SHARE SKIP LOCKED;
    END IF;
    IF witness IS NULL THEN
        PERFORM aiqueue_claim_lock();
        SELECT q.queue_id INTO witness FROM ai_marking_queue q
        WHERE q.run_id = p_run AND q.status IN ('pending', 'processing')
        LIMIT 1;
    END IF;
    IF witness IS NOT NULL THEN
        PERFORM set_config('aiqueue.live_witness',
                           jsonb_set(seen, ARRAY[p_run::text], to_jsonb(witness))::text, true);
        RETURN;
    END IF;
    INSERT INTO ai_marking_outbox (type, assignment_id, run_id, body)
    SELECT 'marking.run_finished', p_assignment, p_run, jsonb_build_object(
               'type', 'marking.run_finished', 'assignment_id', p_assignment,
               'run_id', p_run, 'completed', c.completed, 'failed', c.failed,
               'cancelled', c.cancelled, 'expired', c.expired, 'tokens', u.tokens,
               'cost_usd', u.cost_usd,
               'started_at', c.started_at, 'finished_at', now())
    FROM (SELECT count(*) FILTER (WHERE q.status = 'completed') AS completed,
                 count(*) FILTER (WHERE q.status = 'failed') AS failed,
                 count(*) FILTER (WHERE q.status = 'cancelled') AS cancelled,
                 count(*) FILTER (WHERE q.status = 'expired') AS expired,
                 min(q.created_at) AS started_at
          FROM ai_marking_queue q
          WHERE q.assignment_id = p_assignment AND q.run_id = p_run) c,
         (SELECT coalesce(sum(coalesce(m.prompt_tokens, 0) + coalesce(m.completion_tokens, 0)),
                          0)::bigint AS tokens,
                 sum(m.cost_usd) AS cost_usd
          FROM ai_marking_results m WHERE m.run_id = p_run) u;
END
$$;

-- A row that ended: marking.row_failed when it failed (the error is the row's
-- content-free last_error code), marking.row_expired when it expired (§9d;
-- the same body, error 'expired'), then the run's end test.
CREATE OR REPLACE FUNCTION aiqueue_outbox_on_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('failed', 'expired') THEN
        INSERT INTO ai_marking_outbox (type, assignment_id, run_id, queue_id, body)
        VALUES ('marking.row_' || NEW.status, NEW.assignment_id, NEW.run_id, NEW.queue_id,
                jsonb_build_object('type', 'marking.row_' || NEW.status,
                                   'queue_id', NEW.queue_id,
                                   'submission_id', NEW.submission_id,
                                   'assignment_id', NEW.assignment_id,
                                   'error', NEW.last_error));
    END IF;
    IF OLD.status IN ('pending', 'processing') THEN
        PERFORM aiqueue_outbox_run_finished(NEW.run_id, NEW.assignment_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER ai_marking_queue_outbox
    AFTER UPDATE OF status ON ai_marking_queue
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       AND (NEW.status = 'failed'
                            OR (OLD.status IN ('pending', 'processing')
                                AND NEW.status NOT IN ('pending', 'processing'))))
    EXECUTE FUNCTION aiqueue_outbox_on_end();

-- When a dispatched row is due for recovery (CONTRACT §8e) — or, on a platform
-- the queue asks first (digitalocean), for a look at its invocation: its lease
-- (the dispatch or the last heartbeat) plus the heartbeat timeout once the
-- function has sent a heartbeat, else plus QUEUE_STUCK_AFTER_SECONDS; never
-- later than the dispatch plus the platform's bound (its time limit and a
-- grace; NULL: none); never before `look_after`, when the platform said "not
-- finished yet" or another instance is asking it right now.  greatest() and
-- least() skip NULLs, so each missing term simply drops out.
CREATE OR REPLACE FUNCTION aiqueue_recover_at(lease_at timestamptz, started_at timestamptz,
                                              beat boolean, look_after timestamptz,
                                              stuck float8, heartbeat float8, bound float8)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT greatest(look_after, least(
        lease_at + make_interval(secs => CASE WHEN beat THEN heartbeat ELSE stuck END),
        started_at + make_interval(secs => bound)))
$$;

-- Manual retry (one row or all): failed rows start over with fresh attempts
-- and a fresh turn, exactly as an enqueue hands them out (queries.sql:
-- enqueue): a group's k-th retried row gets start + k, start being the turn
-- after the group's last one or the turn at the head of its priority's due
-- rows, and a fresh seq.  Without them a retried row kept the turn it had
-- when first enqueued and went ahead of every group that enqueued since
-- (issue 23).
-- It records the moves itself, set-based (a replay by filter moves 10,000 rows
-- in one call, CONTRACT §9e): one change-feed row per assignment (the batch
-- form an enqueue writes, migration 0009), one count delta per status, one
-- wake-up, while aiqueue.bulk_move keeps the row trigger out.
CREATE OR REPLACE FUNCTION aiqueue_retry(p_ids uuid[], p_actor text)
RETURNS TABLE (queue_id uuid) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    moved bigint;
BEGIN
    PERFORM set_config('aiqueue.bulk_move', 'on', true);
    RETURN QUERY
    WITH locked AS MATERIALIZED (
        SELECT q.queue_id, q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS grp,
               q.seq
        FROM ai_marking_queue q
        WHERE q.queue_id = ANY (p_ids) AND q.status = 'failed'
        ORDER BY q.seq
        FOR UPDATE
    ),
    picked AS (
        SELECT l.*, row_number() OVER (PARTITION BY l.pool, l.priority, l.grp ORDER BY l.seq) - 1
                    AS k
        FROM locked l
    ),
    groups AS (
        SELECT p.pool, p.priority, p.grp, count(*) AS n FROM picked p
        GROUP BY p.pool, p.priority, p.grp
    ),
    -- Turns are a pool's (aiqueue 0019): the head of the row's own pool.
    head AS (
        SELECT pr.pool, pr.priority, coalesce(
            (SELECT q.turn FROM ai_marking_queue q
             WHERE q.status = 'pending' AND q.priority = pr.priority AND q.run_after <= now()
               AND q.pool = pr.pool
             ORDER BY q.priority DESC, q.turn, q.seq LIMIT 1),
            (SELECT max(g.last_turn) + 1 FROM ai_marking_groups g
             WHERE g.pool = pr.pool AND g.priority = pr.priority),
            0) AS turn
        FROM (SELECT DISTINCT gr.pool, gr.priority FROM groups gr) pr
    ),
    turns AS (
        INSERT INTO ai_marking_groups AS g (pool, priority, group_key, last_turn)
        SELECT gr.pool, gr.priority, gr.grp, h.turn + gr.n - 1
        FROM groups gr JOIN head h ON h.pool = gr.pool AND h.priority = gr.priority
        ON CONFLICT (pool, priority, group_key) DO UPDATE
        SET last_turn = greatest(g.last_turn + (SELECT gr.n FROM groups gr
                                                WHERE gr.pool = g.pool
                                                  AND gr.priority = g.priority
                                                  AND gr.grp = g.group_key),
                                 EXCLUDED.last_turn),
            updated_at = now()
        RETURNING g.pool, g.priority, g.group_key, g.last_turn
    ),
    updated AS (
        UPDATE ai_marking_queue q
        SET status = 'pending', attempts = 0, run_after = now(), finished_at = NULL,
            last_error = NULL, refused_since = NULL, updated_at = now(),
            turn = t.last_turn - gr.n + 1 + p.k,
            -- Inside a round groups go in the order they joined (seq): a fresh
            -- seq puts the retried row behind the groups already waiting.
            seq = DEFAULT
        FROM picked p
        JOIN groups gr ON gr.pool = p.pool AND gr.priority = p.priority AND gr.grp = p.grp
        JOIN turns t ON t.pool = p.pool AND t.priority = p.priority AND t.group_key = p.grp
        WHERE q.queue_id = p.queue_id
        RETURNING q.queue_id, q.assignment_id, q.submission_id
    ),
    history AS (
        INSERT INTO ai_marking_attempts (queue_id, kind, outcome, ended_at, actor)
        SELECT u.queue_id, 'action', 'retry', now(), p_actor FROM updated u
    ),
    feed AS (
        INSERT INTO ai_marking_events (assignment_id, status, queue_ids, submission_ids)
        SELECT u.assignment_id, 'pending', array_agg(u.queue_id), array_agg(u.submission_id)
        FROM updated u GROUP BY u.assignment_id
    ),
    counts AS (
        INSERT INTO ai_marking_counts (status, n)
        SELECT x.status, x.n FROM (SELECT count(*) AS n FROM updated) c,
             LATERAL (VALUES ('failed', -c.n), ('pending', c.n)) AS x (status, n)
        WHERE c.n > 0
    )
    SELECT u.queue_id FROM updated u;
    GET DIAGNOSTICS moved = ROW_COUNT;
    PERFORM set_config('aiqueue.bulk_move', 'off', true);
    -- Each group the rows joined waits (lifted to the floor when it was idle),
    -- once per group, in key order like an enqueue (the row trigger stayed out).
    IF moved > 0 THEN
        PERFORM aiqueue_fair_wait(n.pool, n.priority, n.grp, n.turn, n.seq)
        FROM (SELECT DISTINCT ON (1, 2, 3) q.pool, q.priority,
                     coalesce(q.group_key, q.assignment_id) AS grp, q.turn, q.seq
              FROM ai_marking_queue q
              WHERE q.queue_id = ANY (p_ids) AND q.status = 'pending'
              ORDER BY 1, 2, 3, q.turn, q.seq) n;
    END IF;
    IF moved > 0 THEN
        PERFORM aiqueue_notify();
    END IF;
END
$$;

-- == Alerts (aiqueue 0018, CONTRACT §9d) ==
--
-- The three conditions, per pool (aiqueue 0023; one control row per pool, and
-- the claim makes one for every pool it is configured with), measured at
-- p_now (NULL: now(); tests inject a later moment instead of waiting): the
-- oldest due row's wait (backlog_age, naming that row's kind), how long due
-- rows have waited with nothing dispatched (stalled), and the share of rows
-- that failed among those that ended in the last 15 minutes (failure_spike).
-- One row per alert and pool: its kind, value, threshold, whether it fires.
-- A waiting row is pending, not expired, and not scheduled for later: a row
-- with a not_before is no backlog until its time, and its wait starts then; a
-- batch-lane row waiting for a provider batch (§9f) is no backlog until its
-- live time comes.  A row waiting out a retry's backoff still waits: counting
-- it out would make both alerts flap open and shut through an outage, as
-- every row goes in and out of its backoff.
DROP FUNCTION IF EXISTS aiqueue_alert_values(timestamptz, float8, float8, integer, float8);
CREATE OR REPLACE FUNCTION aiqueue_alert_values(p_now timestamptz, backlog_s float8,
                                                stalled_s float8, failures_min integer,
                                                failure_rate float8)
RETURNS TABLE (alert text, pool text, kind text, value float8, threshold float8,
               firing boolean)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    t timestamptz := coalesce(p_now, now());
    p record;
    oldest record;
    last_dispatch timestamptz;
    held boolean;
    quiet float8;
    wait float8;
BEGIN
    FOR p IN SELECT c.pool, c.paused, c.busy_until FROM ai_queue_control c ORDER BY c.pool LOOP
        -- Rows without a not_before in created order (the status index, stopping
        -- at the pool's first unexpired one), and scheduled rows whose time has come.
        SELECT o.since, o.kind INTO oldest FROM (
            (SELECT q.created_at AS since, q.kind FROM ai_marking_queue q
             WHERE q.status = 'pending' AND q.pool = p.pool AND q.not_before IS NULL
               AND q.created_at <= t AND (q.expires_at IS NULL OR q.expires_at > t)
               AND NOT (q.lane = 'batch' AND q.run_after > t)
             ORDER BY q.created_at LIMIT 1)
            UNION ALL
            (SELECT q.not_before, q.kind FROM ai_marking_queue q
             WHERE q.status = 'pending' AND q.pool = p.pool AND q.not_before <= t
               AND (q.expires_at IS NULL OR q.expires_at > t)
               AND NOT (q.lane = 'batch' AND q.run_after > t)
             ORDER BY q.not_before LIMIT 1)) o
        ORDER BY o.since LIMIT 1;
        wait := coalesce(date_part('epoch', t - oldest.since), 0);
        RETURN QUERY SELECT 'backlog_age'::text, p.pool, oldest.kind, wait, backlog_s,
                            oldest.since IS NOT NULL AND wait > backlog_s;

        -- Held by a refusal or paused by an operator, or every due row is in a
        -- group paused at a spend cap (CONTRACT §9c): waiting is the plan, not
        -- a stall.  Otherwise: the newest dispatch of the pool the function
        -- took (a dispatch error or a refusal is no progress), walking the
        -- attempts' primary key backwards.
        held := p.paused OR coalesce(p.busy_until > t, false) OR NOT EXISTS (
            SELECT 1 FROM ai_marking_fair f
            CROSS JOIN LATERAL (
                SELECT 1 FROM ai_marking_queue q
                WHERE q.status = 'pending' AND q.pool = f.pool AND q.priority = f.priority
                  AND coalesce(q.group_key, q.assignment_id) = f.group_key
                  AND q.run_after <= t AND (q.expires_at IS NULL OR q.expires_at > t)
                LIMIT 1) due
            WHERE f.pool = p.pool AND f.waiting
              AND (f.capped_until IS NULL OR f.capped_until <= t)
              AND (f.due_at IS NULL OR f.due_at <= t));
        quiet := NULL;
        IF oldest.since IS NOT NULL AND NOT held THEN
            SELECT a.started_at INTO last_dispatch
            FROM ai_marking_attempts a JOIN ai_marking_queue q ON q.queue_id = a.queue_id
            WHERE a.kind = 'dispatch' AND a.outcome IS DISTINCT FROM 'dispatch_error'
              AND a.outcome IS DISTINCT FROM 'refused' AND q.pool = p.pool
            ORDER BY a.id DESC LIMIT 1;
            quiet := date_part('epoch', t - greatest(last_dispatch, oldest.since));
        END IF;
        RETURN QUERY SELECT 'stalled'::text, p.pool, NULL::text, coalesce(quiet, 0), stalled_s,
                            coalesce(quiet > stalled_s, false);
    END LOOP;

    RETURN QUERY
    SELECT 'failure_spike'::text, c.pool, NULL::text,
           CASE WHEN e.ended > 0 THEN e.failed::float8 / e.ended ELSE 0 END, failure_rate,
           coalesce(e.failed >= failures_min AND e.failed::float8 / e.ended >= failure_rate,
                    false)
    FROM ai_queue_control c
    LEFT JOIN (SELECT q.pool, count(*) FILTER (WHERE q.status = 'failed') AS failed,
                      count(*) AS ended
               FROM ai_marking_queue q
               WHERE q.status IN ('completed', 'failed')
                 AND q.finished_at > t - interval '15 minutes' AND q.finished_at <= t
               GROUP BY q.pool) e ON e.pool = c.pool
    ORDER BY c.pool;
END
$$;

-- Open the alerts that fire and resolve the open ones that no longer do, each
-- change with its event in the outbox, in one transaction.  One evaluator at a
-- time: an instance that finds the lock taken skips (the other is doing the
-- same work), and the unique index on open alerts is the wall behind it.
-- Answers one row per change: (alert, 'opened' | 'resolved').
CREATE OR REPLACE FUNCTION aiqueue_alerts_evaluate(p_now timestamptz, backlog_s float8,
                                                   stalled_s float8, failures_min integer,
                                                   failure_rate float8)
RETURNS TABLE (alert text, change text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    IF NOT pg_try_advisory_xact_lock(7301730173017303) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH v AS MATERIALIZED (
        SELECT * FROM aiqueue_alert_values(p_now, backlog_s, stalled_s, failures_min,
                                           failure_rate)
    ),
    -- One incident per alert and pool (aiqueue 0023; each names its pool, and
    -- backlog_age the kind of the row that waited longest when it opened).
    opened AS (
        INSERT INTO ai_queue_alerts (alert, pool, kind, value, threshold, opened_at)
        SELECT v.alert, v.pool, v.kind, v.value, v.threshold, coalesce(p_now, now())
        FROM v WHERE v.firing
        ON CONFLICT (alert, pool) WHERE resolved_at IS NULL DO NOTHING
        RETURNING *
    ),
    -- Resolved: it no longer fires, or its pool is no longer measured.
    ended AS (
        SELECT a.id, coalesce(v.value, 0) AS now_value
        FROM ai_queue_alerts a LEFT JOIN v ON v.alert = a.alert AND v.pool = a.pool
        WHERE a.resolved_at IS NULL AND NOT coalesce(v.firing, false)
    ),
    resolved AS (
        UPDATE ai_queue_alerts a SET resolved_at = coalesce(p_now, now())
        FROM ended e WHERE a.id = e.id
        RETURNING a.*, e.now_value
    ),
    events AS (
        INSERT INTO ai_marking_outbox (type, assignment_id, body)
        SELECT 'marking.alert_opened', '', jsonb_build_object(
                   'type', 'marking.alert_opened', 'alert', o.alert, 'pool', o.pool,
                   'kind', o.kind, 'value', o.value, 'threshold', o.threshold,
                   'opened_at', o.opened_at)
        FROM opened o
        UNION ALL
        SELECT 'marking.alert_resolved', '', jsonb_build_object(
                   'type', 'marking.alert_resolved', 'alert', r.alert, 'pool', r.pool,
                   'kind', r.kind, 'value', r.now_value, 'threshold', r.threshold,
                   'opened_at', r.opened_at, 'resolved_at', r.resolved_at)
        FROM resolved r
    )
    SELECT o.alert, 'opened'::text FROM opened o
    UNION ALL
    SELECT r.alert, 'resolved'::text FROM resolved r;
END
$$;
