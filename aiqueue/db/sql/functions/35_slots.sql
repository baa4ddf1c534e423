-- Slots: the in-flight caps held by rows of ai_marking_slots, not by one lock.
--
-- A pool's cap (its learned limit L, else its max_in_flight; 1 while its
-- breaker is tripped, for the half-open probe) and a kind's cap are each a
-- numbered set of slot rows: (pool, '', n) for the pool, (pool, kind, n) for a
-- kind with a cap of its own (the kind a row runs as: a fallback shares its
-- fallback's slots, docs/fallback-budgets-calendar.md).  The claim takes one
-- free row of each that applies, `FOR UPDATE SKIP LOCKED`, in the statement
-- before it charges the row's group (42_fair_pick.sql): a row another claim is
-- taking right now is stepped over, never waited for, so claims for different
-- free slots proceed at once, in one pool or many (docs/architecture.md).
--
-- A slot names its holder, the dispatch (queue_id, dispatch_seq), and is free
-- when that dispatch no longer holds a row of ai_marking_claimed: every end of
-- a dispatch (a result, a failure, a refusal, recovery, a cancel, erasure)
-- deletes that row already, so none of them writes the slot.  Only numbers up
-- to the cap are usable; a dispatch still out above a cap that came down (an
-- L cut) is moved onto a free number under it first (aiqueue_slots_fold).
--
-- Why the second look (aiqueue_slot_free, in a statement of its own): a
-- locking read re-checks only the locked row's own columns when it finds the
-- row changed; the holder's row of ai_marking_claimed is another table, seen
-- in the statement's first snapshot.  The slot is locked by then, and whoever
-- held it before has committed, so a new statement's snapshot sees that.

-- Whether slot (p_pool, p_kind, p_n) is free: no holder, or its holder's
-- dispatch has ended.
CREATE OR REPLACE FUNCTION aiqueue_slot_free(p_pool text, p_kind text, p_n integer)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM ai_marking_slots s
                   WHERE s.pool = p_pool AND s.kind = p_kind AND s.n = p_n
                     AND (s.queue_id IS NULL
                          OR NOT EXISTS (SELECT 1 FROM ai_marking_claimed c
                                         WHERE c.queue_id = s.queue_id
                                           AND c.dispatch_seq = s.dispatch_seq)));
END
$$;

-- A free slot of (p_pool, p_kind) numbered up to `cap`, locked (held by no
-- dispatch still out); NULL: none.  A number's row is written the first
-- time a claim needs it, by the claim that holds that number's advisory lock
-- (taken without waiting), with `p_id`, `p_seq` as its holder: no two
-- transactions insert one key at once, so no insert waits for another's commit.
CREATE OR REPLACE FUNCTION aiqueue_slot_lock(p_pool text, p_kind text, cap integer, top integer,
                                             p_id uuid, p_seq integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    got integer;
    tried integer[] := '{}';
BEGIN
    LOOP
        SELECT s.n INTO got FROM ai_marking_slots s
        WHERE s.pool = p_pool AND s.kind = p_kind AND s.n <= cap AND s.n <> ALL (tried)
          AND (s.queue_id IS NULL
               OR NOT EXISTS (SELECT 1 FROM ai_marking_claimed c
                              WHERE c.queue_id = s.queue_id AND c.dispatch_seq = s.dispatch_seq))
        ORDER BY s.n LIMIT 1
        FOR UPDATE SKIP LOCKED;
        EXIT WHEN got IS NULL;
        IF aiqueue_slot_free(p_pool, p_kind, got) THEN
            RETURN got;
        END IF;
        tried := tried || got;
        got := NULL;
    END LOOP;
    FOR got IN SELECT g FROM generate_series(coalesce(top, 0) + 1, cap) g LOOP
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(
            hashtext('aiqueue.slot/' || p_pool || '/' || p_kind), got);
        INSERT INTO ai_marking_slots (pool, kind, n, queue_id, dispatch_seq)
        VALUES (p_pool, p_kind, got, p_id, p_seq)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            RETURN got;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

-- Dispatches still out on numbers above a lowered cap (an L cut, a smaller
-- max_in_flight) move down onto free numbers up to it, so that the numbers a
-- claim may take count them.  False when one is still above (no free number
-- for it, or another claim is moving it right now): then nothing may go.
CREATE OR REPLACE FUNCTION aiqueue_slots_fold(p_pool text, p_kind text, cap integer,
                                              top integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    hi record;
    lo integer;
BEGIN
    FOR hi IN SELECT s.n, s.queue_id, s.dispatch_seq FROM ai_marking_slots s
              JOIN ai_marking_claimed c ON c.queue_id = s.queue_id
                                       AND c.dispatch_seq = s.dispatch_seq
              WHERE s.pool = p_pool AND s.kind = p_kind AND s.n > cap ORDER BY s.n LOOP
        PERFORM 1 FROM ai_marking_slots s
        WHERE s.pool = p_pool AND s.kind = p_kind AND s.n = hi.n FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        CONTINUE WHEN aiqueue_slot_free(p_pool, p_kind, hi.n);  -- it ended meanwhile
        lo := aiqueue_slot_lock(p_pool, p_kind, cap, top, hi.queue_id, hi.dispatch_seq);
        IF lo IS NULL THEN
            RETURN false;
        END IF;
        UPDATE ai_marking_slots s SET queue_id = hi.queue_id, dispatch_seq = hi.dispatch_seq
        WHERE s.pool = p_pool AND s.kind = p_kind AND s.n = lo;
        UPDATE ai_marking_slots s SET queue_id = NULL, dispatch_seq = NULL
        WHERE s.pool = p_pool AND s.kind = p_kind AND s.n = hi.n;
    END LOOP;
    RETURN true;
END
$$;

-- One free slot of (p_pool, p_kind) under `cap`, given to the dispatch (p_id,
-- p_seq); NULL: none is free.
CREATE OR REPLACE FUNCTION aiqueue_slot_take(p_pool text, p_kind text, cap integer, p_id uuid,
                                             p_seq integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    top integer;
    got integer;
BEGIN
    SELECT max(s.n) INTO top FROM ai_marking_slots s WHERE s.pool = p_pool AND s.kind = p_kind;
    IF top > cap AND NOT aiqueue_slots_fold(p_pool, p_kind, cap, top) THEN
        RETURN NULL;
    END IF;
    got := aiqueue_slot_lock(p_pool, p_kind, cap, top, p_id, p_seq);
    IF got IS NOT NULL THEN
        UPDATE ai_marking_slots s SET queue_id = p_id, dispatch_seq = p_seq
        WHERE s.pool = p_pool AND s.kind = p_kind AND s.n = got;
    END IF;
    RETURN got;
END
$$;

-- The slots a claim of row `p_id` (in `p_pool`, its next dispatch) takes: the
-- pool's while the pool has a cap, then its kind's while the kind has one.
-- NULL when both were free and are now the row's; else what is full, 'pool'
-- or 'kind' (a pool's slot taken first is given up again: free, though locked
-- until the transaction ends).
CREATE OR REPLACE FUNCTION aiqueue_slots_claim(plan jsonb, p_pool text, p_id uuid)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r record;
    ctl ai_queue_control%ROWTYPE := aiqueue_pool_control(p_pool);
    pcap integer := aiqueue_flow_cap(ctl, (aiqueue_plan_pool(plan, p_pool)).cap);
    key text;
    kcap integer;
    pn integer;
BEGIN
    SELECT q.kind, q.run_kind, q.dispatch_seq + 1 AS seq INTO r
    FROM ai_marking_queue q WHERE q.queue_id = p_id;
    -- A tripped breaker lets one probe out, and only while nothing else is.
    IF ctl.consecutive_failures >= (plan ->> 'breaker_threshold')::integer THEN
        pcap := 1;
    END IF;
    IF coalesce(pcap, 0) > 0 THEN
        pn := aiqueue_slot_take(p_pool, '', pcap, p_id, r.seq);
        IF pn IS NULL THEN
            RETURN 'pool';
        END IF;
    END IF;
    key := coalesce(r.run_kind, r.kind);
    kcap := (SELECT k.cap FROM jsonb_to_recordset(plan -> 'kinds')
                               AS k (name text, cap integer, runs_as text)
             WHERE coalesce(k.runs_as, k.name) = key LIMIT 1);
    IF coalesce(kcap, 0) > 0 AND aiqueue_slot_take(p_pool, key, kcap, p_id, r.seq) IS NULL THEN
        UPDATE ai_marking_slots s SET queue_id = NULL, dispatch_seq = NULL
        WHERE s.pool = p_pool AND s.kind = '' AND s.n = pn;
        RETURN 'kind';
    END IF;
    RETURN NULL;
END
$$;
