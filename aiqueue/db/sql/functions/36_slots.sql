-- Slots: the in-flight caps held by rows of ai_marking_slots, not by one lock.
--
-- A pool's cap (its learned limit L, else its max_in_flight; 1 while its
-- breaker is tripped, for the half-open probe) and a kind's cap are each a
-- numbered set of slot rows: (pool, '', n) for the pool, (pool, kind, n) for a
-- kind with a cap of its own (the kind a row runs as: a fallback shares its
-- fallback's slots, docs/fallback-budgets-calendar.md).  A claim locks one
-- free row of each that applies, `FOR UPDATE SKIP LOCKED`: the pool's before
-- it walks that pool's groups (a claim that finds none locks no group and no
-- row), the kind's once the row is chosen, before its group is charged
-- (42_fair_pick.sql).  A slot another claim holds right now is stepped over,
-- never waited for, so claims of different free slots proceed at once, in one
-- pool or many (docs/architecture.md).  The claim's own statement names the
-- dispatch as the slots' holder (aiqueue_claim_row, 60_claim.sql); a slot
-- locked and not used is free again when the claim ends.
--
-- A slot is free when it has no holder or its holder's dispatch (queue_id,
-- dispatch_seq) no longer holds a row of ai_marking_claimed: every end of a
-- dispatch (a result, a failure, a refusal, recovery, a cancel, erasure)
-- deletes that row already, so none of them writes the slot.  Only numbers up
-- to the cap are usable; a dispatch still out above a cap that came down (an
-- L cut) is moved onto a free number under it first (aiqueue_slots_fold).
--
-- Why a second look after the lock (in a statement of its own): a locking
-- read re-checks only the locked row's own columns when it finds the row
-- changed; the holder's row of ai_marking_claimed is another table, seen in
-- the statement's first snapshot.  The slot is locked by then, and whoever
-- held it before has committed, so a new statement's snapshot sees that.

-- A free slot of (p_pool, p_kind) numbered up to `cap`, locked; NULL: none.
-- Dispatches still out on numbers above the cap are folded under it first
-- (unless `fold` is false: the fold's own call).  A number's row is written the first
-- time a claim needs it, by the claim that holds that number's advisory lock
-- (taken without waiting), so no insert waits for another's commit.
CREATE OR REPLACE FUNCTION aiqueue_slot_take(p_pool text, p_kind text, cap integer,
                                             fold boolean DEFAULT true)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    got integer;
    tried integer[] := '{}';
BEGIN
    IF fold AND EXISTS (SELECT 1 FROM ai_marking_slots s JOIN ai_marking_claimed c
                            ON c.queue_id = s.queue_id AND c.dispatch_seq = s.dispatch_seq
                        WHERE s.pool = p_pool AND s.kind = p_kind AND s.n > cap)
       AND NOT aiqueue_slots_fold(p_pool, p_kind, cap) THEN
        RETURN NULL;
    END IF;
    LOOP
        SELECT s.n INTO got FROM ai_marking_slots s
        WHERE s.pool = p_pool AND s.kind = p_kind AND s.n <= cap AND s.n <> ALL (tried)
          AND (s.queue_id IS NULL
               OR NOT EXISTS (SELECT 1 FROM ai_marking_claimed c
                              WHERE c.queue_id = s.queue_id AND c.dispatch_seq = s.dispatch_seq))
        ORDER BY s.n LIMIT 1
        FOR UPDATE SKIP LOCKED;
        EXIT WHEN got IS NULL;
        IF NOT EXISTS (SELECT 1 FROM ai_marking_slots s JOIN ai_marking_claimed c
                           ON c.queue_id = s.queue_id AND c.dispatch_seq = s.dispatch_seq
                       WHERE s.pool = p_pool AND s.kind = p_kind AND s.n = got) THEN
            RETURN got;
        END IF;
        tried := tried || got;
    END LOOP;
    -- (Every number up to the cap not written yet: one whose first claim rolled
    -- back is written by a later one.)
    FOR got IN SELECT g FROM generate_series(1, cap) g
               WHERE NOT EXISTS (SELECT 1 FROM ai_marking_slots s
                                 WHERE s.pool = p_pool AND s.kind = p_kind AND s.n = g) LOOP
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(
            hashtext('aiqueue.slot/' || p_pool || '/' || p_kind), got);
        INSERT INTO ai_marking_slots (pool, kind, n) VALUES (p_pool, p_kind, got)
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
CREATE OR REPLACE FUNCTION aiqueue_slots_fold(p_pool text, p_kind text, cap integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    hi record;
    lo integer;
BEGIN
    FOR hi IN SELECT s.n FROM ai_marking_slots s
              JOIN ai_marking_claimed c ON c.queue_id = s.queue_id
                                       AND c.dispatch_seq = s.dispatch_seq
              WHERE s.pool = p_pool AND s.kind = p_kind AND s.n > cap ORDER BY s.n LOOP
        PERFORM 1 FROM ai_marking_slots s
        WHERE s.pool = p_pool AND s.kind = p_kind AND s.n = hi.n FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        lo := aiqueue_slot_take(p_pool, p_kind, cap, false);
        IF lo IS NULL THEN
            RETURN false;
        END IF;
        -- Its holder as committed now (it may have ended meanwhile: then both are free).
        UPDATE ai_marking_slots s SET queue_id = h.queue_id, dispatch_seq = h.dispatch_seq
        FROM ai_marking_slots h
        WHERE s.pool = p_pool AND s.kind = p_kind AND s.n = lo
          AND h.pool = p_pool AND h.kind = p_kind AND h.n = hi.n;
        UPDATE ai_marking_slots s SET queue_id = NULL, dispatch_seq = NULL
        WHERE s.pool = p_pool AND s.kind = p_kind AND s.n = hi.n;
    END LOOP;
    RETURN true;
END
$$;

-- The pool's slot a claim in `p_pool` locks before it walks the pool's
-- groups: 0 when the pool has no cap, NULL when none is free.  Its cap in one
-- read: the plan's, the learned limit on its control row, and a tripped
-- breaker's 1 (one probe out, and only while nothing else is).
CREATE OR REPLACE FUNCTION aiqueue_slots_pool(plan jsonb, p_pool text)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    cap integer;
BEGIN
    SELECT CASE WHEN c.consecutive_failures >= (plan ->> 'breaker_threshold')::integer THEN 1
                ELSE aiqueue_flow_cap(c, x.cap) END INTO cap
    FROM (SELECT NULL) one
    LEFT JOIN jsonb_to_recordset(plan -> 'pools') AS x (name text, cap integer)
        ON x.name = p_pool
    LEFT JOIN ai_queue_control c ON c.pool = p_pool;
    IF coalesce(cap, 0) <= 0 THEN
        RETURN 0;
    END IF;
    RETURN aiqueue_slot_take(p_pool, '', cap);
END
$$;

-- The kind's slot a claim of row `p_id` in `p_pool` locks (the kind it runs
-- as, `kind`): `n` 0 when the kind has no cap, NULL when none is free.
CREATE OR REPLACE FUNCTION aiqueue_slots_kind(plan jsonb, p_pool text, p_id uuid,
                                              OUT kind text, OUT n integer)
LANGUAGE plpgsql AS $$
DECLARE
    cap integer;
BEGIN
    kind := (SELECT coalesce(r.run_kind, r.kind) FROM ai_marking_ready r WHERE r.queue_id = p_id);
    cap := (SELECT k.cap FROM jsonb_to_recordset(plan -> 'kinds')
                              AS k (name text, cap integer, runs_as text)
            WHERE coalesce(k.runs_as, k.name) = kind LIMIT 1);
    n := CASE WHEN coalesce(cap, 0) <= 0 THEN 0 ELSE aiqueue_slot_take(p_pool, kind, cap) END;
END
$$;

-- The slot of dispatch (p_queue_id, p_dispatch_seq) of a row a late result
-- completed while that dispatch was out (aiqueue_complete keeps it for the
-- dispatch still at the function): free once that dispatch ends.  The
-- completed row is in its month of ended rows, which this alone reads of the
-- record, and only when the dispatch still holds a slot: a failure, refusal or
-- repeated result that holds none opens no month (aiqueue 0078).
CREATE OR REPLACE FUNCTION aiqueue_late_slot_free(p_queue_id uuid, p_dispatch_seq integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ai_marking_claimed c
               WHERE c.queue_id = p_queue_id AND c.dispatch_seq = p_dispatch_seq) THEN
        DELETE FROM ai_marking_claimed c USING ai_marking_queue q
        WHERE c.queue_id = p_queue_id AND c.dispatch_seq = p_dispatch_seq
          AND q.queue_id = c.queue_id AND q.status = 'completed'
          AND NOT (q.status IN ('pending', 'processing'));  -- the ended months alone
    END IF;
END
$$;
