-- A result's settle, in call order: apply, raise L, correct the charge, claim the next.
--
-- A webhook's results in one round trip: aiqueue_settle_many (this file,
-- first) locks their rows, then settles each (aiqueue_settle), which calls
--   aiqueue_result         a result, the same for a settle and a lone complete:
--     aiqueue_complete       apply it (its triggers: 80_feed, 90_outbox), priced
--                            by aiqueue_result_cost (50_spend's prices)
--     aiqueue_after_result   the claim lock (30_gate) before any row the claim
--                            writes too, then:
--       aiqueue_flow_result    raise the learned limit L (71_settle_charge; rule
--                              in 20_flow)
--       aiqueue_money_result   learn the estimate, correct the charge
--                              (71_settle_charge; 50_spend)
--   aiqueue_handback       a repeated result: hand back the row it claimed
--                          (71_settle_charge)
--   aiqueue_claim          the next row (60_claim: 30_gate, 40_fair, 42_fair_pick,
--                          45_cache, 50_spend),
--                          taken by the settle's caller to send it
--
-- Transaction flags (set_config(..., true): they last to the transaction's
-- end).  Each is read by a trigger, which takes no arguments, so none can be
-- a parameter:
--   flag                  set by                              read by
--   aiqueue.end_lock      aiqueue_result, around its complete  aiqueue_outbox_run_finished
--                                                              (90_outbox): take the claim
--                                                              lock instead of pinning a row
--   aiqueue.live_witness  aiqueue_outbox_run_finished          itself: a run's live row seen
--                                                              earlier in this transaction
--   aiqueue.bulk_move     aiqueue_retry (95_recovery)          the fair join (40_fair) and the
--                                                              change feed's row trigger
--                                                              (80_feed): the bulk statement
--                                                              does their work once
--   aiqueue.fair_bulk     batch_fair_bulk (batch.sql)          the fair join (40_fair): a
--                                                              batch's rows join once each

-- A webhook's completed results, each settled in turn (aiqueue_settle), in one
-- statement: one row per item, in the items' order, with the row claimed for
-- it.  `items`: [{"queue_id", "dispatch_seq", "result", "usage"}].  Locks:
-- every item's queue row, then its submission, first, each in one order, so
-- no later wait for a row lock comes while this holds the claim lock (which
-- the first settle takes, and a claim's holder never waits for a row lock).
CREATE OR REPLACE FUNCTION aiqueue_settle_many(items jsonb, plan jsonb, p_taker uuid)
RETURNS TABLE (item uuid, applied boolean, queue_id uuid, submission_id uuid,
               assignment_id text, attempts integer, dispatch_seq integer, payload text,
               content text, more boolean, breaker_dirty boolean, kind text, pool text)
LANGUAGE plpgsql AS $$
DECLARE
    it record;
BEGIN
    IF jsonb_array_length(items) > 1 THEN
        PERFORM 1 FROM ai_marking_queue q
        WHERE q.queue_id IN (SELECT (x ->> 'queue_id')::uuid FROM jsonb_array_elements(items) x)
        ORDER BY q.queue_id FOR UPDATE;
        PERFORM 1 FROM submissions s
        WHERE s.id IN (SELECT q.submission_id FROM ai_marking_queue q
                       WHERE q.queue_id IN (SELECT (x ->> 'queue_id')::uuid
                                            FROM jsonb_array_elements(items) x))
        ORDER BY s.id FOR UPDATE;
    END IF;
    FOR it IN SELECT x.queue_id, x.dispatch_seq, x.result, x.usage
              FROM jsonb_to_recordset(items)
                   AS x (queue_id uuid, dispatch_seq integer, result jsonb, usage jsonb) LOOP
        RETURN QUERY SELECT it.queue_id, s.*
                     FROM aiqueue_settle(it.queue_id, it.result, it.usage, it.dispatch_seq,
                                         plan, p_taker) s;
    END LOOP;
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
-- row this settle claimed (next_queue_id, next_seq), and that row's line
-- says who took it to send it (taken_by: the caller's token, which it keeps
-- across its retries of one webhook).  When the same result comes again from
-- that caller (the answer was lost, and the store or the webhook retried) and
-- the row is still processing under that claim, it is handed back instead of
-- a second row being claimed: nothing is applied twice and no claimed row is
-- left without a dispatch.  Any other caller (a function repeating a webhook
-- whose answer it lost) never gets it: the first caller sends it.
-- The handed-back row was charged (turns, spend) by the settle that claimed it.
CREATE OR REPLACE FUNCTION aiqueue_settle(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                                          p_dispatch_seq integer, plan jsonb, p_taker uuid)
RETURNS TABLE (applied boolean, queue_id uuid, submission_id uuid, assignment_id text,
               attempts integer, dispatch_seq integer, payload text, content text,
               more boolean, breaker_dirty boolean, kind text, pool text)
LANGUAGE plpgsql AS $$
BEGIN
    applied := aiqueue_result(p_queue_id, p_result, p_usage, p_dispatch_seq, plan);
    IF NOT applied THEN
        SELECT h.* INTO queue_id, submission_id, assignment_id, attempts, dispatch_seq,
                        payload, content, more, breaker_dirty, kind, pool
        FROM aiqueue_handback(p_queue_id, p_dispatch_seq, p_taker) h;
        IF FOUND THEN
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    SELECT c.* INTO queue_id, submission_id, assignment_id, attempts, dispatch_seq,
                    payload, content, more, breaker_dirty, kind, pool
    FROM aiqueue_claim(plan, p_taker) c;
    -- Only the first settle's claim is the result's to hand back: a repeat's
    -- own claim is its caller's, and keeps the first one's link.
    IF FOUND AND applied THEN
        UPDATE ai_marking_attempts a
        SET next_queue_id = aiqueue_settle.queue_id, next_seq = aiqueue_settle.dispatch_seq
        WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq
          AND a.kind = 'dispatch';
    END IF;
    RETURN NEXT;
END
$$;

-- A completed result, applied at most once (aiqueue_complete); when it was new,
-- what follows a result (aiqueue_after_result).  The settle and a lone complete
-- (queue.sql: complete) both run this.  The claim lock from the end on
-- (aiqueue 0023): the outbox test takes it rather than pinning a row, and the
-- charges after are written under it, in the claim's order (see
-- aiqueue_outbox_run_finished).
CREATE OR REPLACE FUNCTION aiqueue_result(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                                          p_dispatch_seq integer, plan jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    applied boolean;
BEGIN
    PERFORM set_config('aiqueue.end_lock', 'on', true);
    applied := aiqueue_complete(p_queue_id, p_result, p_usage, p_dispatch_seq, plan -> 'money');
    PERFORM set_config('aiqueue.end_lock', 'off', true);
    IF applied THEN
        PERFORM aiqueue_after_result(p_queue_id, p_dispatch_seq, p_usage, plan);
    END IF;
    RETURN applied;
END
$$;

-- After a new result: its pool's L rises and its usage corrects what its
-- dispatch charged.  The counters, spend windows and budget window it writes
-- are the claim's rows too, so the claim's lock comes first (aiqueue 0023).
CREATE OR REPLACE FUNCTION aiqueue_after_result(p_queue_id uuid, p_dispatch_seq integer,
                                                p_usage jsonb, plan jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM aiqueue_claim_lock();
    PERFORM aiqueue_flow_result(p_queue_id, p_dispatch_seq, p_usage, plan);
    PERFORM aiqueue_money_result(p_queue_id, p_dispatch_seq, p_usage, plan -> 'money');
END
$$;

-- Apply a result at most once: the row lock plus the status test mean a second
-- (concurrent or later) delivery finds the row completed and changes nothing.
-- A late result of an earlier dispatch still completes a row that is not done.
-- The usage is stored priced (aiqueue_result_cost: the function's cost, else
-- the pool's prices in `money`); aiqueue_complete_record then writes the
-- review record and the counters.
CREATE OR REPLACE FUNCTION aiqueue_complete(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                                            p_dispatch_seq integer, money jsonb DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH row AS (
        SELECT q.queue_id, q.submission_id, q.assignment_id, q.run_id, q.group_key,
               q.kind, q.pool, date_part('epoch', now() - q.started_at) AS seconds,
               aiqueue_priced(p_usage, money, q.pool) AS usage
        FROM ai_marking_queue q
        WHERE q.queue_id = p_queue_id AND q.status IN ('pending', 'processing', 'failed')
        FOR UPDATE
    ),
    -- What the result replaces.  The lock reads the newest committed mark (a
    -- revert that committed while we waited), which a revert must restore.
    prev AS (
        SELECT s.id, s.ai_result, s.ai_marked_at
        FROM submissions s JOIN row ON s.id = row.submission_id
        FOR UPDATE OF s
    ),
    sub AS (
        UPDATE submissions s SET ai_result = p_result, ai_marked_at = now()
        FROM prev WHERE s.id = prev.id RETURNING s.id
    ),
    done AS (
        UPDATE ai_marking_queue q
        SET status = 'completed', finished_at = now(), last_error = NULL,
            usage = row.usage, updated_at = now(),
            -- A late result of an earlier dispatch: the current one is still at
            -- the function, which keeps the row's slot until it reports or its
            -- lease runs out (else the function would get one job over the cap).
            lease_at = CASE WHEN q.status = 'processing' AND q.dispatch_seq <> p_dispatch_seq
                            THEN q.lease_at END
        FROM row, sub
        WHERE q.queue_id = row.queue_id
        RETURNING q.queue_id
    ),
    history AS (
        UPDATE ai_marking_attempts a
        SET ended_at = now(), usage = row.usage,
            outcome = CASE WHEN a.ended_at IS NULL THEN 'completed' ELSE 'completed_late' END
        FROM done, row
        WHERE a.queue_id = done.queue_id AND a.dispatch_seq = p_dispatch_seq
          AND a.kind = 'dispatch'
        RETURNING a.outcome
    )
    -- In this statement: the row's end triggers (the run's end, 90_outbox) read
    -- the record when the statement ends.
    SELECT count(aiqueue_complete_record(t, p_result, prev.ai_result, prev.ai_marked_at,
                                         (SELECT h.outcome FROM history h LIMIT 1))) INTO n
    FROM row t JOIN prev ON prev.id = t.submission_id JOIN done ON true;
    IF n = 0 THEN  -- the current dispatch of a row a late result completed: free its slot
        UPDATE ai_marking_queue q SET lease_at = NULL
        WHERE q.queue_id = p_queue_id AND q.status = 'completed'
          AND q.dispatch_seq = p_dispatch_seq AND q.lease_at IS NOT NULL;
    END IF;
    RETURN n > 0;
END
$$;

-- A completed row's review record of what the result replaced
-- (ai_marking_results) and its one counter delta (ai_marking_tally).  `r`:
-- aiqueue_complete's row, with the priced usage; `outcome`: its attempt's.
CREATE OR REPLACE FUNCTION aiqueue_complete_record(r record, p_result jsonb, previous jsonb,
                                                   previous_at timestamptz, outcome text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    model text := r.usage ->> 'model';
    prompt bigint := aiqueue_usage_int(r.usage -> 'prompt_tokens');
    completion bigint := aiqueue_usage_int(r.usage -> 'completion_tokens');
    cost numeric := CASE WHEN jsonb_typeof(r.usage -> 'cost_usd') = 'number'
                         THEN (r.usage ->> 'cost_usd')::numeric END;
BEGIN
    INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, run_id, "group",
                                    result, previous_result, previous_marked_at, model,
                                    prompt_tokens, completion_tokens, cost_usd,
                                    processing_seconds, kind, pool, lane)
    VALUES (r.queue_id, r.submission_id, r.assignment_id, r.run_id, r.group_key, p_result,
            previous, previous_at, model, prompt, completion, cost,
            r.seconds, r.kind, r.pool,
            -- the overnight lane (0020) marks its usage; everything else is live
            CASE WHEN r.usage ->> 'lane' = 'batch' THEN 'batch' ELSE 'live' END)
    -- A backfilled record (migration 0008) of a row completed before: keep it.
    ON CONFLICT (queue_id) DO NOTHING;
    INSERT INTO ai_marking_tally (outcome, job, model, le, prompt_tokens, completion_tokens,
                                  cost_usd, seconds)
    VALUES (coalesce(outcome, 'completed'), 'completed', model,
            (SELECT min(b) FROM unnest(aiqueue_buckets()) b WHERE b >= r.seconds),
            coalesce(prompt, 0), coalesce(completion, 0), coalesce(cost, 0),
            coalesce(r.seconds, 0));
    RETURN true;
END
$$;

-- A token count from a usage object: a non-negative whole number, else NULL.
CREATE OR REPLACE FUNCTION aiqueue_usage_int(v jsonb) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(v) = 'number' AND (v::text)::numeric >= 0
                     AND (v::text)::numeric < 1e15
                THEN round((v::text)::numeric)::bigint END
$$;

-- The processing-time buckets of the /metrics histogram (upper bounds, seconds).
CREATE OR REPLACE FUNCTION aiqueue_buckets() RETURNS float8[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY[0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600]::float8[]
$$;
