-- Turns while claims run at once: the walk's view of groups other claims are charging.
--
-- No lock serialises claims (30_gate, 36_slots.sql), so a claim can walk the
-- groups while another has charged one and not committed yet: the walk then
-- sees that group's counter before its charge.  A claim locks the counter row
-- of a group before it takes it, SKIP LOCKED (aiqueue_race_lock).  A group
-- whose row another transaction holds (a claim charging it, a result
-- correcting it, an enqueue joining it) is stepped over, unless its counter
-- after that charge (its first row's estimate, aiqueue_fair_next_charge) would
-- still come before the group this claim would take instead
-- (aiqueue_race_behind; a tie counts, the heads would decide it): then the
-- claim waits for that row's lock, for as long as it takes, which ends when
-- the holder commits or rolls back, and walks again (aiqueue_race_wait), as
-- many times as that happens.  So the order is the one claims one at a time
-- would give.  A group whose counter moved since the walk read it (a charge
-- committed in between) makes the walk stale: it walks again.  Claims of
-- other groups and of other pools never wait for each other.
--
-- Why no cycle of waits can form.  Only a claim that holds no counter row
-- waits (`waits`): it started holding no row (a plain claim, store.claim),
-- and it has locked no counter row since.  Its lock of a row is taken in a
-- subtransaction, given back (the subtransaction rolled back) when the walk
-- turns out stale; its wait, too, takes the row's lock in a subtransaction
-- rolled back at once: the wait ends at the holder's end and leaves nothing
-- held.  Once it holds a counter row it never waits again (aiqueue_race_held;
-- the prompt cache's warm pick, 45_cache.sql, says when it locked one), and
-- its queue rows (aiqueue_fair_head) come only after its group's row.  So
-- while it waits it holds only slot rows (36_slots.sql: every lock of a slot
-- row is SKIP LOCKED, the claim's own statement writes only those it locked,
-- a new slot number is written under a lock taken without waiting): nobody
-- waits for it, and it closes no cycle.  A claim whose plan has a budget or a
-- spend cap holds the claim's lock (30_gate) while it waits, as every claim
-- did before the slots: whoever holds a counter row took that lock before it
-- (a settle's corrections, a refund, a batch's charge, a fallback's move, a
-- run's end before a row's group rejoins, 74_moved.sql) or never takes it (an
-- enqueue, a row made due sooner).  Whoever queues for a row behind a waiting
-- claim waits for the same holder.  A settle's claim holds its result's rows,
-- the claim's lock and the counter rows it corrected (71_settle_charge), so
-- it never waits: it steps over a group being charged (a statement whose rows
-- rejoin both that group and one the settle corrected, an enqueue or a
-- recovery, locks them in key order, and the two could each wait for the
-- other's row).
--
-- The state one pick carries (the type aiqueue_race, migration 0077): the
-- group to wait for (pool NULL: none) and its counter after that charge;
-- whether this claim may still wait (`waits`); after aiqueue_race_lock,
-- whether the walk is stale (`again`) and whether this claim now holds the
-- group's row (`held`).

-- A claim whose transaction has written and locked nothing yet (no
-- transaction id: a plain claim) holds no row; one that has (a settle's
-- claim, a claim that just wrote its pool's first control row) never waits.
CREATE OR REPLACE FUNCTION aiqueue_race_start() RETURNS aiqueue_race
LANGUAGE sql AS $$
    SELECT ROW(NULL, NULL, NULL, NULL, pg_current_xact_id_if_assigned() IS NULL, false,
               false)::aiqueue_race
$$;

-- A new walk: nothing to wait for yet.
CREATE OR REPLACE FUNCTION aiqueue_race_walk(r aiqueue_race) RETURNS aiqueue_race
LANGUAGE sql IMMUTABLE AS $$
    SELECT ROW(NULL, NULL, NULL, NULL, r.waits, false, r.held)::aiqueue_race
$$;

-- This claim holds a counter row: it never waits again (the group it noted
-- is stepped over).
CREATE OR REPLACE FUNCTION aiqueue_race_held(r aiqueue_race) RETURNS aiqueue_race
LANGUAGE sql IMMUTABLE AS $$
    SELECT ROW(NULL, NULL, NULL, NULL, false, r.again, true)::aiqueue_race
$$;

-- Whether the group to wait for comes before a walked group (priority, counter).
CREATE OR REPLACE FUNCTION aiqueue_race_behind(r aiqueue_race, p_priority integer,
                                               p_counter float8)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT r.pool IS NOT NULL
           AND (r.priority > p_priority OR (r.priority = p_priority AND r.counter <= p_counter))
$$;

-- A walked group (its counter as the walk read it): its row locked for this
-- claim (`held`), unless its counter moved since (`again`: a claim that may
-- wait gives the lock back), or another transaction holds it: noted as the
-- group to wait for, when this claim may wait and none is noted yet.
CREATE OR REPLACE FUNCTION aiqueue_race_lock(r aiqueue_race, p_pool text, p_priority integer,
                                             p_group text, p_counter float8)
RETURNS aiqueue_race LANGUAGE plpgsql AS $$
DECLARE
    now_at float8;
BEGIN
    IF r.waits THEN
        BEGIN
            SELECT f.counter INTO now_at FROM ai_marking_fair f
            WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group
            FOR UPDATE SKIP LOCKED;
            IF now_at <> p_counter THEN
                RAISE SQLSTATE 'AQ043';  -- stale: the lock goes with the subtransaction
            END IF;
        EXCEPTION WHEN SQLSTATE 'AQ043' THEN
            r.again := true;
            RETURN r;
        END;
    ELSE
        SELECT f.counter INTO now_at FROM ai_marking_fair f
        WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group
        FOR UPDATE SKIP LOCKED;
        r.again := now_at <> p_counter;  -- (it keeps the row: stale once at most per group)
    END IF;
    IF now_at IS NOT NULL THEN
        RETURN aiqueue_race_held(r);
    ELSIF r.waits AND r.pool IS NULL THEN
        r.pool := p_pool;
        r.priority := p_priority;
        r.group_key := p_group;
        r.counter := p_counter + aiqueue_fair_next_charge(p_pool, p_priority, p_group);
    END IF;
    r.held := false;
    RETURN r;
END
$$;

-- Wait for the noted group's holder to end (then the caller walks again): its
-- row's lock, taken in a subtransaction rolled back at once, so nothing stays held.
CREATE OR REPLACE FUNCTION aiqueue_race_wait(r aiqueue_race) RETURNS aiqueue_race
LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        PERFORM 1 FROM ai_marking_fair f
        WHERE f.pool = r.pool AND f.priority = r.priority AND f.group_key = r.group_key
        FOR UPDATE;
        RAISE SQLSTATE 'AQ043';
    EXCEPTION WHEN SQLSTATE 'AQ043' THEN
        NULL;
    END;
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

-- What a claim of a group's first pending row charges it (aiqueue_fair_charge:
-- its assignment's estimate, weighted); 'infinity' when it has none.
CREATE OR REPLACE FUNCTION aiqueue_fair_next_charge(p_pool text, p_priority integer,
                                                    p_group text)
RETURNS float8 LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT aiqueue_fair_weight(e.prompt_tokens, e.completion_tokens)
                     FROM (SELECT q.assignment_id FROM ai_marking_ready r
                           JOIN ai_marking_queue_live q ON q.queue_id = r.queue_id
                           WHERE r.pool = p_pool AND r.priority = p_priority
                             AND r.grp = p_group
                           ORDER BY r.turn, r.seq LIMIT 1) h
                     CROSS JOIN LATERAL aiqueue_estimate(p_pool, h.assignment_id) e),
                    'infinity');
END
$$;
