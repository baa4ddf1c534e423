-- The claim: the next due rows, under the claim's lock.

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
                  q.payload_id, q.kind, q.pool, q.run_kind
    ),
    history AS (
        -- ran_kind: the fallback kind that runs it (§10e; NULL: its own).
        INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt, ran_kind)
        SELECT cl.queue_id, cl.dispatch_seq, cl.attempts, cl.run_kind FROM claimed cl
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
        ctl.consecutive_failures > 0 OR ctl.circuit_open_until IS NOT NULL
            OR ctl.refused_since IS NOT NULL,
        got.kind, got.pool;
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
