-- The prompt cache at the claim (45_cache.sql has the prefixes' state): locality
-- within fair turns and the warm-up's hold.

-- Locality: the first due row, of a kind with room, of a waiting group of
-- p_pool and p_priority whose counter is within the quantum of `anchor` (the
-- smallest counter the walk met) and whose prefix is hot, smallest counter
-- first; locked (SKIP LOCKED).  A few candidates at most, by
-- ai_marking_fair_warm_idx; one whose warmth ran out is forgotten.  A group
-- at a spend cap is left to the walk (which pauses it).  `held`: whether it
-- locked a candidate's counter row, taken or not (a claim holding one never
-- waits for another's, 43_fair_race.sql).
CREATE OR REPLACE FUNCTION aiqueue_cache_warm_pick(spec jsonb, money jsonb, kinds text[],
                                                   p_pool text, p_priority integer,
                                                   anchor float8, OUT group_key text,
                                                   OUT joins bigint, OUT queue_id uuid,
                                                   OUT assignment_id text, OUT payload_id bigint,
                                                   OUT held boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    w record;
    r record;
    st record;
    bound float8;
BEGIN
    held := false;
    -- By walk key (a lower bound of the counter: aiqueue_fair_key), then the
    -- few candidates by their counters.
    FOR w IN
        SELECT * FROM (
            SELECT f.pool, f.priority, f.group_key, f.joins, f.counter, f.warm_until,
                   f.capped_until, f.due_at
            FROM ai_marking_fair f
            WHERE f.waiting AND f.warm_until IS NOT NULL AND f.pool = p_pool
              AND f.priority = p_priority
            ORDER BY f.pool, f.priority, f.walk_key LIMIT 8) c
        ORDER BY c.counter
    LOOP
        -- The quantum only once a candidate is met (most walks meet none).
        bound := coalesce(bound, anchor + aiqueue_cache_quantum(spec, p_pool));
        EXIT WHEN w.counter > bound;
        -- A group another claim is charging right now is left to it (claims
        -- run at once, 42_fair_pick): its counter row is locked here first.
        CONTINUE WHEN aiqueue_fair_lock(w.pool, w.priority, w.group_key) IS NULL;
        held := true;
        IF w.warm_until <= now() THEN
            UPDATE ai_marking_fair f SET warm_until = NULL
            WHERE f.pool = w.pool AND f.priority = w.priority AND f.group_key = w.group_key;
            CONTINUE;
        END IF;
        CONTINUE WHEN w.capped_until > now() OR w.due_at > now();
        CONTINUE WHEN aiqueue_spend_capped(money -> w.pool)
                      AND (aiqueue_spend_stop(money -> w.pool, w.pool, w.group_key)).until
                          IS NOT NULL;
        r := aiqueue_fair_head(w.pool, w.priority, w.group_key, kinds);
        CONTINUE WHEN r.queue_id IS NULL;
        st := aiqueue_cache_state(spec, w.pool, r.payload_id);
        CONTINUE WHEN st.state <> 'hot';
        group_key := w.group_key;
        joins := w.joins;
        queue_id := r.queue_id;
        assignment_id := r.assignment_id;
        payload_id := r.payload_id;
        RETURN;
    END LOOP;
END
$$;

-- A group whose next row waits for its prefix's warm-up: walks step over it
-- until one mark after the warm-up began, or its answer (aiqueue_cache_answered).
CREATE OR REPLACE FUNCTION aiqueue_cache_hold(p_pool text, p_priority integer, p_group text,
                                              p_joins bigint, hold timestamptz)
RETURNS void LANGUAGE sql AS $$
    UPDATE ai_marking_fair f SET due_at = hold
    WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group
      AND f.joins = p_joins
$$;

-- A row of a prefix had an answer (a result, or a progress item: its call has
-- begun answering, so the entry is readable): the prefix is warm, and the
-- row's group no longer waits for it.  The row's pool, priority, group and
-- payload come from the caller, which has the row already.
-- True when the prefix was cold or warming (a group may wait for it).
CREATE OR REPLACE FUNCTION aiqueue_cache_answered(p_pool text, p_priority integer,
                                                  p_group text, p_payload bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF p_payload IS NULL THEN
        RETURN false;
    END IF;
    -- Once a second at most per prefix: a class's answers arrive together.
    UPDATE ai_marking_prefixes x SET answered_at = now()
    WHERE x.pool = p_pool AND x.payload_id = p_payload
      AND (x.answered_at IS NULL OR x.answered_at < now() - interval '1 second'
           OR x.answered_at < x.warming_at);
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE ai_marking_fair f SET due_at = NULL, joins = f.joins + 1
    WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group
      AND f.due_at IS NOT NULL;
    RETURN true;
END
$$;

-- Locality within fair turns: the first due row of a group with a hot prefix
-- within the quantum of the pool's smallest counter (aiqueue_cache_warm_pick),
-- with the slot of the kind it runs as (36_slots.sql; none free: NULL
-- `kind_slot`, nothing taken, the walk goes on as without a cache), charged
-- to its group and marked dispatched (NULL queue_id: none).  `held`: whether
-- it locked a group's counter row (aiqueue_cache_warm_pick), taken or not.
CREATE OR REPLACE FUNCTION aiqueue_cache_local(spec jsonb, money jsonb, kinds text[],
                                               p_pool text, p_priority integer,
                                               p_counter float8, plan jsonb,
                                               OUT queue_id uuid, OUT tokens float8,
                                               OUT usd float8, OUT slot_kind text,
                                               OUT kind_slot integer, OUT held boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    w record := aiqueue_cache_warm_pick(spec, money, kinds, p_pool, p_priority, p_counter);
    c record;
BEGIN
    held := w.held;
    IF w.queue_id IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_path_exists(plan, '$.kinds[*] ? (@.cap > 0)') THEN  -- (a kind has a cap)
        SELECT k.kind, k.n INTO slot_kind, kind_slot
        FROM aiqueue_slots_kind(plan, p_pool, w.queue_id) k;
        IF kind_slot IS NULL THEN
            RETURN;
        END IF;
    END IF;
    c := aiqueue_fair_charge(p_pool, p_priority, w.group_key, w.joins, w.queue_id,
                             w.assignment_id, money);
    PERFORM aiqueue_cache_dispatched(spec, p_pool, p_priority, w.group_key, w.payload_id, 'hot');
    queue_id := w.queue_id;
    tokens := c.tokens;
    usd := c.usd;
END
$$;

-- A walked group's due row's prefix (`p_payload`): its state, what the claim
-- must note of it (aiqueue_cache_dispatched); NULL: nothing (the pool schedules
-- as before, or an uncached prefix noted within the hour).  A warming prefix
-- holds the group for its answer.
CREATE OR REPLACE FUNCTION aiqueue_cache_check(spec jsonb, p_pool text, p_priority integer,
                                               p_group text, p_joins bigint, p_payload bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st record;
BEGIN
    IF spec IS NULL THEN
        RETURN NULL;
    END IF;
    st := aiqueue_cache_state(spec, p_pool, p_payload);
    -- A cold prefix's first row goes alone: claims run at once (42_fair_pick),
    -- so its note's lock is taken here, without waiting.  Held by another claim:
    -- that one sends it (this group is stepped over); taken: the state is read
    -- again (a statement of its own), as the claim before may have committed.
    IF st.state = 'cold' AND p_payload IS NOT NULL THEN
        IF NOT pg_try_advisory_xact_lock(hashtext('aiqueue.prefix'),
                                         hashtext(p_pool || '/' || p_payload)) THEN
            RETURN 'warming';
        END IF;
        st := aiqueue_cache_state(spec, p_pool, p_payload);
    END IF;
    IF st.state = 'warming' THEN
        PERFORM aiqueue_cache_hold(p_pool, p_priority, p_group, p_joins, st.hold);
    END IF;
    IF st.state = 'off' AND (p_payload IS NULL OR st.seen >= now() - interval '1 hour') THEN
        RETURN NULL;
    END IF;
    RETURN st.state;
END
$$;
