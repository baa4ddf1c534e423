-- Turns while claims run at once: the walk's view of groups other claims are charging.
--
-- No lock serialises claims (30_gate, 36_slots.sql), so a claim can walk the
-- groups while another has charged one and not committed yet: the walk then
-- sees that group's counter before its charge.  A claim locks the counter row
-- of a group before it takes it, SKIP LOCKED (aiqueue_race_lock).  A group
-- whose row another transaction holds is stepped over, unless its counter
-- after that charge (its first row's estimate, aiqueue_fair_next_charge)
-- would still come before the group this claim would take instead
-- (aiqueue_race_behind; a tie counts, the heads would decide it): then the
-- claim waits for that commit and walks again (aiqueue_race_wait), so the
-- order stays the one claims one at a time would give.  It waits by watching
-- the group's committed counter, which holds no lock; only when that charge
-- does not commit soon does it wait for the row's lock, and only a claim that
-- holds no row yet, once, so no cycle of waits can form.  A settle's claim
-- (it holds its result's rows and the claim's lock) waits for neither: it
-- steps over a group being charged.  A group
-- charged and committed since the walk read it makes the walk stale: it walks
-- again (a few times at most).  Claims of other groups and of other pools
-- never wait for each other.
--
-- The state one pick carries (the type aiqueue_race, migration 0077): the
-- group to wait for (pool NULL: none), its counter after that charge and as
-- the walk read it (`was`); whether this claim may still wait for a lock;
-- the groups it stopped waiting for (`passed`; NULL: it waits for none); the
-- walks so far; after aiqueue_race_lock, whether the walk is stale (`again`)
-- and whether this claim now holds the group's row (`held`).

-- A plain claim holds no row when it starts; a settle's claim does (its
-- result's rows, and the claim's lock: it never waits here, so the lock it
-- holds is held no longer for it).
CREATE OR REPLACE FUNCTION aiqueue_race_start() RETURNS aiqueue_race
LANGUAGE sql AS $$
    SELECT ROW(NULL, NULL, NULL, NULL, NULL, pg_current_xact_id_if_assigned() IS NULL,
               CASE WHEN pg_current_xact_id_if_assigned() IS NULL THEN '{}'::text[] END,
               0, false, false)::aiqueue_race
$$;

-- A new walk: nothing to wait for yet.
CREATE OR REPLACE FUNCTION aiqueue_race_walk(r aiqueue_race) RETURNS aiqueue_race
LANGUAGE sql IMMUTABLE AS $$
    SELECT ROW(NULL, r.priority, r.group_key, r.counter, r.was, r.waits, r.passed, r.walks + 1,
               false, r.held)::aiqueue_race
$$;

-- Whether the group to wait for comes before a walked group (priority, counter).
CREATE OR REPLACE FUNCTION aiqueue_race_behind(r aiqueue_race, p_priority integer,
                                               p_counter float8)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT r.pool IS NOT NULL
           AND (r.priority > p_priority OR (r.priority = p_priority AND r.counter <= p_counter))
$$;

-- A walked group (its counter as the walk read it): its row locked for this
-- claim (`held`; the walk is stale, `again`, when its counter moved since),
-- or another transaction holds it (a claim charging it, a result correcting
-- it, an enqueue joining it): noted as the group to wait for, when none is yet.
CREATE OR REPLACE FUNCTION aiqueue_race_lock(r aiqueue_race, p_pool text, p_priority integer,
                                             p_group text, p_counter float8)
RETURNS aiqueue_race LANGUAGE plpgsql AS $$
DECLARE
    now_at float8;
BEGIN
    SELECT f.counter INTO now_at FROM ai_marking_fair f
    WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group
    FOR UPDATE SKIP LOCKED;
    r.held := now_at IS NOT NULL;
    IF r.held THEN
        r.waits := false;  -- a row is held now
        r.again := r.walks < 8 AND now_at <> p_counter;
    -- (`passed` NULL: a settle's claim, which waits for nothing.)
    ELSIF r.pool IS NULL AND NOT (p_pool || '/' || p_priority || '/' || p_group) = ANY (r.passed)
    THEN
        r.pool := p_pool;
        r.priority := p_priority;
        r.group_key := p_group;
        r.was := p_counter;
        r.counter := p_counter + aiqueue_fair_next_charge(p_pool, p_priority, p_group);
    END IF;
    RETURN r;
END
$$;

-- Wait for the noted group's charge to commit (then the caller walks again).
CREATE OR REPLACE FUNCTION aiqueue_race_wait(r aiqueue_race) RETURNS aiqueue_race
LANGUAGE plpgsql AS $$
BEGIN
    IF aiqueue_fair_await(r.pool, r.priority, r.group_key, r.was) THEN
        RETURN r;
    END IF;
    IF r.waits THEN
        PERFORM 1 FROM ai_marking_fair f
        WHERE f.pool = r.pool AND f.priority = r.priority AND f.group_key = r.group_key
        FOR UPDATE;
        r.waits := false;
    ELSE
        r.passed := r.passed || (r.pool || '/' || r.priority || '/' || r.group_key);
    END IF;
    RETURN r;
END
$$;

-- Lock a walked group's counter row unless another transaction holds it (a
-- claim charging it, a result correcting it, an enqueue joining it): its
-- counter as now committed when this claim holds it, NULL when another does.
CREATE OR REPLACE FUNCTION aiqueue_fair_lock(p_pool text, p_priority integer, p_group text)
RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    c float8;
BEGIN
    SELECT f.counter INTO c FROM ai_marking_fair f
    WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group
    FOR UPDATE SKIP LOCKED;
    RETURN c;
END
$$;

-- Whether a group's committed counter moves from `was` within about 30 ms (a
-- charge committing): each look a statement of its own, a new snapshot.
CREATE OR REPLACE FUNCTION aiqueue_fair_await(p_pool text, p_priority integer, p_group text,
                                              was float8)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..30 LOOP
        PERFORM pg_sleep(0.001);
        IF aiqueue_fair_counter(p_pool, p_priority, p_group) IS DISTINCT FROM was THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;

-- A group's counter as committed now (a statement of its own: a new snapshot).
CREATE OR REPLACE FUNCTION aiqueue_fair_counter(p_pool text, p_priority integer, p_group text)
RETURNS float8 LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT f.counter FROM ai_marking_fair f
            WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group);
END
$$;

-- What a claim of a group's first pending row charges it (aiqueue_fair_charge:
-- its assignment's estimate, weighted); 'infinity' when it has none.
CREATE OR REPLACE FUNCTION aiqueue_fair_next_charge(p_pool text, p_priority integer,
                                                    p_group text)
RETURNS float8 LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT aiqueue_fair_weight(e.prompt_tokens, e.completion_tokens)
                     FROM (SELECT q.assignment_id FROM ai_marking_ready r
                           JOIN ai_marking_queue q ON q.queue_id = r.queue_id
                           WHERE r.pool = p_pool AND r.priority = p_priority
                             AND r.grp = p_group
                           ORDER BY r.turn, r.seq LIMIT 1) h
                     CROSS JOIN LATERAL aiqueue_estimate(p_pool, h.assignment_id) e),
                    'infinity');
END
$$;

