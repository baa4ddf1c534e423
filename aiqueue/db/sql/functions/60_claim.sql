-- The claim: the next due row, in three steps (the claim's lock first only
-- where the plan has money rules, aiqueue_plan_serial in 30_gate):
--   aiqueue_room        which kinds have room, and which pools one more row fills (30_gate)
--   aiqueue_claim_row   the fair pick (42_fair_pick: the slots, 36_slots, and the
--                       group's charge) and the row's claim, one statement, which
--                       names the dispatch the slots' holder
--   aiqueue_claim_more  whether another row could be claimed after this one
-- Everything it reads of the settings is its one `plan` document (10_plan).
-- `p_taker`: a settle's caller, who takes the row to send it (70_settle); NULL:
-- the caller sends what it claims.  `p_handed_by`: the row whose result's
-- settle claims this one and links it (next_queue_id); its dispatch line names
-- that row (`handed_by`), which is how an erasure finds the link (erasure.sql).

CREATE OR REPLACE FUNCTION aiqueue_claim(plan jsonb, p_taker uuid DEFAULT NULL,
                                         p_handed_by uuid DEFAULT NULL)
RETURNS TABLE (queue_id uuid, submission_id uuid, assignment_id text, attempts integer,
               dispatch_seq integer, payload text, content text, more boolean,
               breaker_dirty boolean, kind text, pool text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    room record;
    got record;
BEGIN
    IF aiqueue_plan_serial(plan) THEN  -- money rules: the claim's lock (30_gate)
        PERFORM aiqueue_claim_lock();
    END IF;
    -- Calls as assignments: each a plpgsql expression, not a query of its own
    -- (in this volatile function each still takes a fresh snapshot, so it sees
    -- what a claim before it committed).
    room := aiqueue_room(plan, true, true);
    IF cardinality(room.kinds) = 0 THEN
        RETURN;
    END IF;
    IF room.ests <> '{}'::jsonb THEN
        DELETE FROM ai_marking_budget b WHERE b.at < now() - interval '1 day';
    END IF;
    got := aiqueue_claim_row(plan, room.kinds, room.ests, p_taker, p_handed_by);
    IF got.queue_id IS NULL THEN
        RETURN;
    END IF;
    more := aiqueue_claim_more(plan, room.kinds, got.pool = ANY (room.filling), got.pool,
                               got.kind, got.queue_id);
    queue_id := got.queue_id;
    submission_id := got.submission_id;
    assignment_id := got.assignment_id;
    attempts := got.attempts;
    dispatch_seq := got.dispatch_seq;
    payload := got.payload;
    content := got.content;
    breaker_dirty := got.pool = ANY (room.dirty);
    kind := got.kind;
    pool := got.pool;
    RETURN NEXT;
END
$$;

-- The claim of one row of `kinds` (those with room): turns by tokens (aiqueue
-- 0022) pick it (aiqueue_fair_pick), and one statement marks it processing
-- with its charge, opens its attempt and writes its budget window's entry
-- (`ests`: the estimate per pool with a declared budget).  NULLs: none.
CREATE OR REPLACE FUNCTION aiqueue_claim_row(plan jsonb, kinds text[], ests jsonb,
                                             p_taker uuid, p_handed_by uuid, OUT queue_id uuid,
                                             OUT submission_id uuid,
                                             OUT assignment_id text, OUT attempts integer,
                                             OUT dispatch_seq integer, OUT payload text,
                                             OUT content text, OUT kind text, OUT pool text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    -- The first due row, of a kind with room, of the waiting group with the
    -- smallest counter; priority first, turns by rows (aiqueue 0007) breaking
    -- ties; rows waiting out a backoff, kinds without room and groups at a
    -- spend cap are stepped over, not waited for.  It comes locked (SKIP
    -- LOCKED) with the charge its group was given.
    picked record := aiqueue_fair_pick(kinds, plan, plan -> 'money');
BEGIN
    IF picked.queue_id IS NULL THEN
        RETURN;
    END IF;
    WITH claimed AS (
        UPDATE ai_marking_queue_live q
        SET status = 'processing', attempts = q.attempts + 1, dispatch_seq = q.dispatch_seq + 1,
            started_at = now(), progress = NULL, updated_at = now(),
            queue_moves = q.queue_moves + 1,
            charged_tokens = picked.tokens, charged_usd = picked.usd, charged_at = now()
        WHERE q.queue_id = picked.queue_id
        RETURNING q.queue_id, q.submission_id, q.assignment_id, q.attempts, q.dispatch_seq,
                  q.payload_id, q.kind, q.pool, q.run_kind, q::ai_marking_queue AS moved
    ),
    -- What follows the move (74_moved.sql): its live event and count deltas.
    followed AS (
        SELECT aiqueue_feed_moved(ARRAY[cl.moved]),
               aiqueue_counts_moved(ARRAY[cl.moved], ARRAY['pending'])
        FROM claimed cl
    ),
    -- The row's slot while it is at the function (ai_marking_claimed): the caps
    -- count it, recovery walks its lease, its end deletes it.
    slot AS (
        INSERT INTO ai_marking_claimed (queue_id, dispatch_seq, pool, kind, run_kind)
        SELECT cl.queue_id, cl.dispatch_seq, cl.pool, cl.kind, cl.run_kind FROM claimed cl
    ),
    -- The slots the pick locked for it (36_slots.sql) name this dispatch.
    holds AS (
        UPDATE ai_marking_slots s SET queue_id = cl.queue_id, dispatch_seq = cl.dispatch_seq
        FROM claimed cl
        WHERE s.pool = cl.pool
          AND (s.kind, s.n) IN (('', picked.pool_slot), (picked.slot_kind, picked.kind_slot))
    ),
    history AS (
        -- ran_kind: the fallback kind that runs it (; NULL: its own).
        INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt, taken_by, sent_at,
                                         ran_kind, handed_by)
        SELECT cl.queue_id, cl.dispatch_seq, cl.attempts, p_taker,
               CASE WHEN p_taker IS NOT NULL THEN now() END, cl.run_kind, p_handed_by
        FROM claimed cl
    ),
    -- The budget window's entry (only while the row's pool declares a budget).
    budget AS (
        INSERT INTO ai_marking_budget (queue_id, dispatch_seq, assignment_id, tokens, pool)
        SELECT cl.queue_id, cl.dispatch_seq, cl.assignment_id, (ests ->> cl.pool)::bigint,
               cl.pool
        FROM claimed cl
        WHERE ests ? cl.pool
    )
    SELECT cl.queue_id, cl.submission_id, cl.assignment_id, cl.attempts, cl.dispatch_seq,
           -- The enqueue's payload, stored once (migration 0014); none is '{}'.
           coalesce(pl.payload, '{}'::jsonb)::text, s.content, cl.kind, cl.pool
    INTO queue_id, submission_id, assignment_id, attempts, dispatch_seq, payload, content,
         kind, pool
    FROM claimed cl CROSS JOIN followed JOIN submissions s ON s.id = cl.submission_id
    LEFT JOIN ai_marking_payloads pl ON pl.id = cl.payload_id;
END
$$;

-- After a claim of a row of `p_kind` in `p_pool` (this transaction sees it as
-- processing): whether a kind of `kinds` still has room and a due row (in a
-- group not paused at a spend cap).  Only the claimed row's pool and kind
-- changed by this claim (another claim's rows are its own `more`): its pool's
-- gate, `p_full` (aiqueue_room's look at it with one more row in flight),
-- then its kind's cap.  A hint for the caller's chain, not a promise.
CREATE OR REPLACE FUNCTION aiqueue_claim_more(plan jsonb, kinds text[], p_full boolean,
                                              p_pool text, p_kind text, p_claimed uuid)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    kcap integer;
BEGIN
    IF p_full THEN
        kinds := ARRAY(SELECT c FROM unnest(kinds) c
                       WHERE c NOT IN (SELECT k.name FROM jsonb_to_recordset(plan -> 'kinds')
                                            AS k (name text, pool text)
                                       WHERE k.pool = p_pool));
    ELSE
        kcap := (SELECT k.cap FROM jsonb_to_recordset(plan -> 'kinds') AS k (name text, cap integer)
                 WHERE k.name = p_kind);
        IF coalesce(kcap, 0) > 0 AND aiqueue_kind_in_flight(p_pool, p_kind, kcap) >= kcap THEN
            kinds := array_remove(kinds, p_kind);
        END IF;
    END IF;
    -- No kind with room: no walk (it would step over every pending row).
    IF cardinality(kinds) = 0 THEN
        RETURN false;
    END IF;
    RETURN aiqueue_due_exists(kinds, plan, p_claimed);
END
$$;

-- When the first pending row comes due (the ticker's sleep): its run_after,
-- unless its group is paused at a spend cap, whose rows come due when its
-- window rolls over.  With no group paused (the common case) this is the
-- index-only min(run_after) it always was.
CREATE OR REPLACE FUNCTION aiqueue_due_at(kinds text[]) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    resumes timestamptz;
    due timestamptz;
BEGIN
    SELECT min(f.capped_until) INTO resumes FROM ai_marking_fair f
    WHERE f.waiting AND f.capped_until > now();
    IF resumes IS NULL THEN
        SELECT min(q.run_after) INTO due FROM ai_marking_ready q
        WHERE q.kind = ANY (kinds);
        RETURN due;
    END IF;
    SELECT min(q.run_after) INTO due FROM ai_marking_ready q
    WHERE q.kind = ANY (kinds)
      AND NOT EXISTS (SELECT 1 FROM ai_marking_fair f
                      WHERE f.pool = q.pool AND f.priority = q.priority
                        AND f.group_key = q.grp AND f.capped_until > now());
    -- Only the paused groups of these kinds' pools.
    RETURN least(due, (SELECT min(f.capped_until) FROM ai_marking_fair f
                       WHERE f.waiting AND f.capped_until > now()
                         AND EXISTS (SELECT 1 FROM ai_marking_ready q
                                     WHERE q.pool = f.pool AND q.priority = f.priority
                                       AND q.kind = ANY (kinds) AND q.grp = f.group_key)));
END
$$;
