-- The fair pick: the claim's walk over the waiting groups, by turns by tokens.

-- The claim's choice: the first due row of the waiting group with the smallest
-- counter, priority first, turns by rows breaking ties; groups at a spend cap
-- are stepped over.  It charges the group (counter; spend while the pool has
-- a cap) and returns the charge, which the claim writes on the row, and the
-- slots it locked for the row (36_slots.sql), which the claim names the
-- dispatch's.  The groups in turn order one by one (aiqueue_fair_next in
-- 42_fair_walk.sql, a short walk of ai_marking_fair_walk_idx each); one probe of
-- ai_marking_ready_group_idx per group it looks at (aiqueue_fair_head).
-- `kinds`: the kinds with room (NULL: any); a group is walked only in a pool
-- that has one (`plan`: the pools and kinds).  Before the first group of a
-- pool, a slot of the pool (none free: the pool is stepped over, none of its
-- groups or rows locked); then the group's first due row of one of the kinds,
-- with its kind's slot (aiqueue_fair_take; none free: that kind is no longer
-- looked for).
-- Locality within fair turns (45_cache.sql): at the first group of its pool and
-- priority (the smallest counter), a group with a hot prefix within the
-- quantum of it goes first.
-- Claims run at once (43_fair_race.sql): a group's counter row is locked SKIP
-- LOCKED before it is taken; a group another claim is charging is stepped
-- over, or, by a claim that holds no counter row, waited for until that
-- charge commits when it would still come first after it; then it walks again.
CREATE OR REPLACE FUNCTION aiqueue_fair_pick(kinds text[], plan jsonb, money jsonb,
                                             OUT queue_id uuid, OUT tokens float8,
                                             OUT usd float8, OUT pool_slot integer,
                                             OUT slot_kind text, OUT kind_slot integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    g record;
    t record;
    warm boolean;
    -- The prompt cache (45_cache.sql): the pool's settings, where a warm group was looked for.
    cspec jsonb;
    looked text[] := '{}';
    pools text[] := aiqueue_kinds_pools(kinds, plan);
    seen text[];  -- the groups this walk met (pool/priority/group)
    -- The pools met: the number of the slot this claim holds, null when none was free.
    slots jsonb := '{}';
    race aiqueue_race := aiqueue_race_start();  -- 43_fair_race.sql
BEGIN
    <<walks>> LOOP
        race := aiqueue_race_walk(race);
        seen := '{}';
        LOOP
            g := aiqueue_fair_next(pools, seen);
            EXIT WHEN g.group_key IS NULL OR aiqueue_race_behind(race, g.priority, g.counter);
            seen := seen || (g.pool || '/' || g.priority || '/' || g.group_key);
            IF NOT slots ? g.pool THEN
                slots := slots || jsonb_build_object(g.pool, aiqueue_slots_pool(plan, g.pool));
            END IF;
            pool_slot := (slots ->> g.pool)::integer;
            CONTINUE WHEN pool_slot IS NULL;  -- a full pool: none of its groups is locked
            cspec := aiqueue_cache_spec(plan, g.pool);
            warm := cspec IS NOT NULL AND NOT (g.pool || '/' || g.priority) = ANY (looked);
            IF warm THEN
                looked := looked || (g.pool || '/' || g.priority);
                t := aiqueue_cache_local(cspec, money, kinds, g.pool, g.priority, g.counter, plan);
                warm := t.queue_id IS NOT NULL;
                IF t.held THEN
                    race := aiqueue_race_held(race);
                END IF;
            END IF;
            IF NOT warm THEN
                CONTINUE WHEN aiqueue_spend_capped(money -> g.pool)
                              AND aiqueue_spend_stopped(money -> g.pool, g.pool, g.group_key);
                race := aiqueue_race_lock(race, g.pool, g.priority, g.group_key, g.counter);
                EXIT WHEN race.again;
                CONTINUE WHEN NOT race.held;
                t := aiqueue_fair_take(g.pool, g.priority, g.group_key, g.joins, kinds, plan,
                                       money, cspec);
            END IF;
            IF t.queue_id IS NOT NULL THEN
                SELECT t.queue_id, t.tokens, t.usd, t.slot_kind, t.kind_slot
                INTO queue_id, tokens, usd, slot_kind, kind_slot;
                RETURN;
            ELSIF t.slot_kind IS NOT NULL AND t.kind_slot IS NULL THEN  -- a full kind
                kinds := array_remove(kinds, t.slot_kind);
                EXIT walks WHEN cardinality(kinds) = 0;
                pools := aiqueue_kinds_pools(kinds, plan);
            END IF;
        END LOOP;
        CONTINUE WHEN race.again;
        EXIT WHEN race.pool IS NULL;
        race := aiqueue_race_wait(race);
    END LOOP;
END
$$;

-- A walked group's turn, its counter row held: its first due row of a kind
-- with room (none: the group may stop waiting, aiqueue_fair_idle), unless its
-- prefix is warming (the group waits for its answer, one mark at most; the
-- walk serves other groups meanwhile; a cold one sends this row alone); then
-- the slot of the kind it runs as (36_slots.sql: `kind_slot` NULL when none is
-- free, `slot_kind` that kind), then the charge.  NULL queue_id: nothing taken.
CREATE OR REPLACE FUNCTION aiqueue_fair_take(p_pool text, p_priority integer, p_group text,
                                             p_joins bigint, kinds text[], plan jsonb,
                                             money jsonb, cspec jsonb,
                                             OUT queue_id uuid, OUT tokens float8,
                                             OUT usd float8, OUT slot_kind text,
                                             OUT kind_slot integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r record := aiqueue_fair_head(p_pool, p_priority, p_group, kinds);
    cstate text;
    w record;
BEGIN
    IF r.queue_id IS NULL THEN
        PERFORM aiqueue_fair_idle(p_pool, p_priority, p_group, p_joins);
        RETURN;
    END IF;
    cstate := CASE WHEN cspec IS NOT NULL THEN aiqueue_cache_check(
        cspec, p_pool, p_priority, p_group, p_joins, r.payload_id) END;
    IF cstate = 'warming' THEN
        RETURN;
    END IF;
    IF jsonb_path_exists(plan, '$.kinds[*] ? (@.cap > 0)') THEN  -- (a kind has a cap)
        SELECT k.kind, k.n INTO slot_kind, kind_slot
        FROM aiqueue_slots_kind(plan, p_pool, r.queue_id) k;
        IF kind_slot IS NULL THEN
            RETURN;
        END IF;
    END IF;
    w := aiqueue_fair_charge(p_pool, p_priority, p_group, p_joins, r.queue_id,
                             r.assignment_id, money);
    IF cstate IS NOT NULL THEN
        PERFORM aiqueue_cache_dispatched(cspec, p_pool, p_priority, p_group, r.payload_id,
                                         cstate);
    END IF;
    queue_id := r.queue_id;
    tokens := w.tokens;
    usd := w.usd;
END
$$;

-- A group's first due row of a kind with room, locked, with its payload (for
-- the prompt cache; NULLs: none).  One probe of ai_marking_ready_group_kind_idx
-- per kind with room, so a kind at its cap is never walked (aiqueue 0023),
-- then its lock; SKIP LOCKED steps over a row a webhook or the recovery holds
-- right now, and only then is the group walked in turn order (as it always is
-- when any kind will do).
-- force_generic_plan: the probe's generic plan (unnest of a parameter, estimated
-- at 10 kinds) costs more on paper than a custom one (the kinds counted), so the
-- plan cache planned it again on every call (200 us); its plan is the same.
CREATE OR REPLACE FUNCTION aiqueue_fair_head(p_pool text, p_priority integer, p_group text,
                                             kinds text[], OUT queue_id uuid,
                                             OUT assignment_id text, OUT payload_id bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    head uuid;
    r record;
    held boolean := false;
BEGIN
    IF kinds IS NOT NULL THEN
        SELECT c.queue_id INTO head FROM unnest(kinds) k (kind)
        CROSS JOIN LATERAL (
            SELECT h.queue_id, h.turn, h.seq FROM ai_marking_ready h
            WHERE h.pool = p_pool AND h.priority = p_priority AND h.grp = p_group
              AND h.kind = k.kind AND h.run_after <= now()
              AND aiqueue_unexpired(h.expires_at)
            ORDER BY h.turn, h.seq LIMIT 1) c
        ORDER BY c.turn, c.seq LIMIT 1;
        IF head IS NULL THEN
            RETURN;
        END IF;
        SELECT q.queue_id, q.assignment_id, q.payload_id
        INTO queue_id, assignment_id, payload_id
        FROM ai_marking_queue_live q
        WHERE q.queue_id = head AND q.status = 'pending'
        FOR UPDATE SKIP LOCKED;
        held := NOT FOUND;
    END IF;
    IF kinds IS NULL OR held THEN
        -- The record's status is tested again on its locked version: a row
        -- another transaction moved meanwhile is stepped over.
        SELECT q.queue_id, q.assignment_id, q.payload_id INTO r
        FROM ai_marking_ready h JOIN ai_marking_queue_live q ON q.queue_id = h.queue_id
        WHERE h.pool = p_pool AND h.priority = p_priority AND h.grp = p_group
          AND h.run_after <= now() AND (kinds IS NULL OR h.kind = ANY (kinds))
          -- Never an expired row, even before the sweep has ended it (docs/operating/alerts.md); a
          -- not_before is the row's first run_after, so the test above holds it.
          AND aiqueue_unexpired(h.expires_at) AND q.status = 'pending'
        ORDER BY h.turn, h.seq LIMIT 1
        FOR UPDATE OF q SKIP LOCKED;
        queue_id := r.queue_id;
        assignment_id := r.assignment_id;
        payload_id := r.payload_id;
    END IF;
END
$$;

-- A walked group without a due row.  When all its rows went (cancelled,
-- erased) it stops waiting, unless rows joined since the walk looked
-- (`p_joins`).  When its rows wait for later (scheduled, on the batch lane,
-- backing off), not only for room, walks step over it until its first comes
-- due (aiqueue 0023); rows joining or made due sooner forget that.  (A due row
-- of a kind without room stops the test at once.)
CREATE OR REPLACE FUNCTION aiqueue_fair_idle(p_pool text, p_priority integer, p_group text,
                                             p_joins bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ai_marking_fair f
    SET waiting = false, walk_key = f.counter, walk_turn = f.head_turn, walk_seq = f.head_seq
    WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group
      AND f.joins = p_joins
      AND NOT EXISTS (SELECT 1 FROM ai_marking_ready q
                      WHERE q.pool = p_pool AND q.priority = p_priority AND q.grp = p_group);
    IF NOT FOUND AND NOT EXISTS (
        SELECT 1 FROM ai_marking_ready q
        WHERE q.pool = p_pool AND q.priority = p_priority AND q.grp = p_group
          AND q.run_after <= now()) THEN
        UPDATE ai_marking_fair f SET due_at = m.at
        FROM (SELECT min(q.run_after) AS at FROM ai_marking_ready q
              WHERE q.pool = p_pool AND q.priority = p_priority AND q.grp = p_group) m
        WHERE f.pool = p_pool AND f.priority = p_priority
          AND f.group_key = p_group AND f.joins = p_joins AND m.at > now();
    END IF;
END
$$;

-- The charge of a group's row `p_id` (its assignment's estimate): the weighted
-- tokens on its counter, and its cost in the spend windows while the pool has
-- a cap.  The group's head moves to its next pending row; on its last row it
-- stops waiting, unless rows joined since the walk looked (a concurrent
-- enqueue's trigger bumped `joins`; on its commit the UPDATE re-reads the row
-- and keeps it waiting).
CREATE OR REPLACE FUNCTION aiqueue_fair_charge(p_pool text, p_priority integer, p_group text,
                                               p_joins bigint, p_id uuid, p_assignment text,
                                               money jsonb, OUT tokens float8,
                                               OUT usd float8)
LANGUAGE plpgsql AS $$
DECLARE
    e record;
BEGIN
    e := aiqueue_estimate(p_pool, p_assignment);
    tokens := aiqueue_fair_weight(e.prompt_tokens, e.completion_tokens);
    IF aiqueue_spend_capped(money -> p_pool) THEN
        usd := coalesce(e.cost_usd, aiqueue_price_usd(money, p_pool, e.model,
                                                      e.prompt_tokens, e.completion_tokens));
        PERFORM aiqueue_spend_add(money -> p_pool, p_pool, p_group, usd, now());
    END IF;
    UPDATE ai_marking_fair f
    SET counter = f.counter + tokens, head_turn = coalesce(nxt.turn, f.head_turn),
        head_seq = coalesce(nxt.seq, f.head_seq),
        waiting = nxt.turn IS NOT NULL OR f.joins <> p_joins,
        (walk_key, walk_turn, walk_seq) = (
            SELECT k.* FROM aiqueue_fair_key(f, nxt.turn IS NOT NULL OR f.joins <> p_joins,
                                             f.counter + tokens, coalesce(nxt.turn, f.head_turn),
                                             coalesce(nxt.seq, f.head_seq)) k),
        updated_at = now()
    -- The group's next pending row (none: its last went).
    FROM (SELECT NULL) one LEFT JOIN LATERAL (
        SELECT q.turn, q.seq FROM ai_marking_ready q
        WHERE q.pool = p_pool AND q.priority = p_priority AND q.grp = p_group
          AND q.queue_id <> p_id
        ORDER BY q.turn, q.seq LIMIT 1) nxt ON true
    WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group;
END
$$;
