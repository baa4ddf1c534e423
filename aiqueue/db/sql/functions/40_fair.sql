-- Fair turns by tokens: the group counters, their triggers and the fair pick.
--
-- Turns by tokens: the Virtual Token Counter of Sheng et al., "Fairness in
-- Serving Large Language Models" (OSDI 2024).  Each group has a counter per
-- pool and priority (ai_marking_fair); a dispatch charges it input + 2 × output
-- of the row's estimated tokens, the result's usage corrects the charge, and
-- the claim serves the waiting group with the smallest counter.  A group that
-- starts waiting is first lifted to the smallest counter of the groups already
-- waiting, so idleness banks no credit.  Spend caps pause a group (or a pool)
-- until its UTC hour or day rolls over; they never fail a row.

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

-- Is a row of `kinds` due now, other than `except_id`, in a group that is
-- neither paused at a spend cap nor known to wait for later?  The claim's
-- `more` and can_claim (aiqueue 0023): the waiting groups, one probe each per
-- kind, instead of a walk of the claim index past every row not due yet, of
-- a kind without room, or of a paused group.
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
-- one probe of ai_marking_queue_group_idx per group it looks at
-- (aiqueue_fair_head).  `kinds`: the kinds with room (NULL: any); a group is
-- walked only in a pool that has one (`plan`: the pools and kinds), and its
-- first due row of one of them is taken.
CREATE OR REPLACE FUNCTION aiqueue_fair_pick(kinds text[], plan jsonb, money jsonb,
                                             OUT queue_id uuid, OUT tokens float8,
                                             OUT usd float8)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    g record;
    r record;
    spec jsonb;
    stop record;
    -- The prompt cache (45_cache.sql): the pool's settings, the pools and
    -- priorities looked at for a warm group, the row's prefix.
    cpool text;
    cspec jsonb;
    looked text[] := '{}';
    w record;
    st record;
    -- A declared cursor is planned for its first rows (cursor_tuple_fraction):
    -- the walk index in order, where a plain FOR query would sort every
    -- waiting group first.
    walk CURSOR (p_pools text[]) FOR
        SELECT f.pool, f.priority, f.group_key, f.joins, f.counter FROM ai_marking_fair f
        WHERE f.waiting AND (f.capped_until IS NULL OR f.capped_until <= now())
          AND (f.due_at IS NULL OR f.due_at <= now())
          AND (p_pools IS NULL OR f.pool = ANY (p_pools))
        ORDER BY f.priority DESC, f.counter, f.head_turn, f.head_seq;
BEGIN
    FOR g IN walk(aiqueue_kinds_pools(kinds, plan)) LOOP
        IF g.pool IS DISTINCT FROM cpool THEN
            cpool := g.pool;
            cspec := aiqueue_cache_spec(plan, g.pool);
        END IF;
        -- Locality within fair turns: at the first group of its pool and
        -- priority (the smallest counter), a group with a hot prefix within
        -- the quantum of it goes first.
        IF cspec IS NOT NULL AND NOT (g.pool || '/' || g.priority) = ANY (looked) THEN
            looked := looked || (g.pool || '/' || g.priority);
            SELECT * INTO w FROM aiqueue_cache_warm_pick(cspec, money, kinds, g.pool, g.priority,
                                                         g.counter) LIMIT 1;
            IF w.queue_id IS NOT NULL THEN
                SELECT c.tokens, c.usd INTO tokens, usd
                FROM aiqueue_fair_charge(w.pool, w.priority, w.group_key, w.joins, w.queue_id,
                                         w.assignment_id, money) c;
                PERFORM aiqueue_cache_dispatched(cspec, w.pool, w.priority, w.group_key,
                                                 w.payload_id, 'hot');
                queue_id := w.queue_id;
                RETURN;
            END IF;
        END IF;
        spec := money -> g.pool;
        IF aiqueue_spend_capped(spec) THEN
            SELECT * INTO stop FROM aiqueue_spend_stop(spec, g.pool, g.group_key);
            IF stop.until IS NOT NULL THEN
                PERFORM aiqueue_spend_pause_group(g.pool, g.group_key, stop.until, stop.cap);
                CONTINUE;
            END IF;
        END IF;
        SELECT * INTO r FROM aiqueue_fair_head(g.pool, g.priority, g.group_key, kinds);
        IF r.queue_id IS NULL THEN
            PERFORM aiqueue_fair_idle(g.pool, g.priority, g.group_key, g.joins);
            CONTINUE;
        END IF;
        -- A prefix warming up: the group waits for its answer, one mark at most
        -- (the walk serves other groups meanwhile); a cold one sends this row alone.
        IF cspec IS NOT NULL THEN
            st := aiqueue_cache_state(cspec, g.pool, r.queue_id);
            IF st.state = 'warming' THEN
                PERFORM aiqueue_cache_hold(g.pool, g.priority, g.group_key, g.joins, st.hold);
                CONTINUE;
            END IF;
        END IF;
        SELECT c.tokens, c.usd INTO tokens, usd
        FROM aiqueue_fair_charge(g.pool, g.priority, g.group_key, g.joins, r.queue_id,
                                 r.assignment_id, money) c;
        IF cspec IS NOT NULL THEN
            PERFORM aiqueue_cache_dispatched(cspec, g.pool, g.priority, g.group_key,
                                             st.payload_id, st.state);
        END IF;
        queue_id := r.queue_id;
        RETURN;
    END LOOP;
END
$$;

-- A group's first due row of a kind with room, locked (NULLs: none).  One
-- probe of ai_marking_queue_group_kind_idx per kind with room, so a kind at its
-- cap is never walked (aiqueue 0023), then its lock; SKIP LOCKED steps over a
-- row a webhook or the recovery holds right now, and only then is the group
-- walked in turn order (as it always is when any kind will do).
CREATE OR REPLACE FUNCTION aiqueue_fair_head(p_pool text, p_priority integer, p_group text,
                                             kinds text[], OUT queue_id uuid,
                                             OUT assignment_id text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    head uuid;
    r record;
    held boolean := false;
BEGIN
    IF kinds IS NOT NULL THEN
        SELECT c.queue_id INTO head FROM unnest(kinds) k (kind)
        CROSS JOIN LATERAL (
            SELECT h.queue_id, h.turn, h.seq FROM ai_marking_queue h
            WHERE h.status = 'pending' AND h.pool = p_pool AND h.priority = p_priority
              AND coalesce(h.group_key, h.assignment_id) = p_group
              AND h.kind = k.kind AND h.run_after <= now()
              AND aiqueue_unexpired(h.expires_at)
            ORDER BY h.turn, h.seq LIMIT 1) c
        ORDER BY c.turn, c.seq LIMIT 1;
        IF head IS NULL THEN
            RETURN;
        END IF;
        SELECT q.queue_id, q.assignment_id INTO queue_id, assignment_id
        FROM ai_marking_queue q
        WHERE q.queue_id = head AND q.status = 'pending'
        FOR UPDATE SKIP LOCKED;
        held := NOT FOUND;
    END IF;
    IF kinds IS NULL OR held THEN
        SELECT q.queue_id, q.assignment_id INTO r FROM ai_marking_queue q
        WHERE q.status = 'pending' AND q.pool = p_pool AND q.priority = p_priority
          AND coalesce(q.group_key, q.assignment_id) = p_group
          AND q.run_after <= now() AND (kinds IS NULL OR q.kind = ANY (kinds))
          -- Never an expired row, even before the sweep has ended it (§9d); a
          -- not_before is the row's first run_after, so the test above holds it.
          AND aiqueue_unexpired(q.expires_at)
        ORDER BY q.turn, q.seq LIMIT 1
        FOR UPDATE SKIP LOCKED;
        queue_id := r.queue_id;
        assignment_id := r.assignment_id;
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
    UPDATE ai_marking_fair f SET waiting = false
    WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group
      AND f.joins = p_joins
      AND NOT EXISTS (SELECT 1 FROM ai_marking_queue q
                      WHERE q.status = 'pending' AND q.pool = p_pool
                        AND q.priority = p_priority
                        AND coalesce(q.group_key, q.assignment_id) = p_group);
    IF NOT FOUND AND NOT EXISTS (
        SELECT 1 FROM ai_marking_queue q
        WHERE q.status = 'pending' AND q.pool = p_pool AND q.priority = p_priority
          AND coalesce(q.group_key, q.assignment_id) = p_group
          AND q.run_after <= now()) THEN
        UPDATE ai_marking_fair f SET due_at = m.at
        FROM (SELECT min(q.run_after) AS at FROM ai_marking_queue q
              WHERE q.status = 'pending' AND q.pool = p_pool
                AND q.priority = p_priority
                AND coalesce(q.group_key, q.assignment_id) = p_group) m
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
    nxt record;
BEGIN
    SELECT * INTO e FROM aiqueue_estimate(p_pool, p_assignment);
    tokens := aiqueue_fair_weight(e.prompt_tokens, e.completion_tokens);
    IF aiqueue_spend_capped(money -> p_pool) THEN
        usd := coalesce(e.cost_usd, aiqueue_price_usd(money, p_pool, e.model,
                                                      e.prompt_tokens, e.completion_tokens));
        PERFORM aiqueue_spend_add(money -> p_pool, p_pool, p_group, usd, now());
    END IF;
    SELECT q.turn, q.seq INTO nxt FROM ai_marking_queue q
    WHERE q.status = 'pending' AND q.pool = p_pool AND q.priority = p_priority
      AND coalesce(q.group_key, q.assignment_id) = p_group AND q.queue_id <> p_id
    ORDER BY q.turn, q.seq LIMIT 1;
    UPDATE ai_marking_fair f
    SET counter = f.counter + tokens, head_turn = coalesce(nxt.turn, f.head_turn),
        head_seq = coalesce(nxt.seq, f.head_seq),
        waiting = nxt.turn IS NOT NULL OR f.joins <> p_joins, updated_at = now()
    WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group;
END
$$;
