-- A result's settle, in call order: apply, raise L, correct the charge, claim the next.
--
-- One result's round trip: aiqueue_settle (this file, first) calls
--   aiqueue_complete      apply the result (its triggers: 80_feed, 90_outbox)
--   aiqueue_claim_lock    (30_gate) before any row the claim writes too
--   aiqueue_flow_result   raise the learned limit L (rule in 20_flow)
--   aiqueue_money_result  correct the turn counter and spend windows (50_spend)
--   aiqueue_handback      a repeated result: hand back the row it claimed
--   aiqueue_claim         the next row (60_claim: 30_gate, 40_fair, 50_spend)
-- then aiqueue_take_handoff, the sender's later mark that it has the row.
--
-- Transaction flags (set_config(..., true): they last to the transaction's
-- end).  Each is read by a trigger, which takes no arguments, so none can be
-- a parameter:
--   flag                  set by                              read by
--   aiqueue.end_lock      aiqueue_settle, around its complete  aiqueue_outbox_run_finished
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
-- row this settle claimed (next_queue_id, next_seq).  When the same result
-- comes again (the answer was lost, and the store or the webhook retried)
-- and that row is still processing with nobody having taken it to send
-- (sent_at, set by aiqueue_take_handoff), it is handed back instead of a
-- second row being claimed: nothing is applied twice and no claimed row is
-- left without a dispatch.  Whoever takes a handed row first sends it.
-- The handed-back row was charged (turns, spend) by the settle that claimed it.
CREATE OR REPLACE FUNCTION aiqueue_settle(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                               p_dispatch_seq integer, cap integer,
                               breaker_threshold integer, tpm integer DEFAULT 0,
                               rpm integer DEFAULT 0, budget_window float8 DEFAULT 60,
                               plan jsonb DEFAULT NULL, money jsonb DEFAULT NULL)
RETURNS TABLE (applied boolean, queue_id uuid, submission_id uuid, assignment_id text,
               attempts integer, dispatch_seq integer, payload text, content text,
               more boolean, breaker_dirty boolean, kind text, pool text)
LANGUAGE plpgsql AS $$
BEGIN
    -- The claim lock from the end on (aiqueue 0023): the outbox test takes it
    -- rather than pinning a row, and the charges below are written under it,
    -- in the claim's order (see aiqueue_outbox_run_finished).
    PERFORM set_config('aiqueue.end_lock', 'on', true);
    applied := aiqueue_complete(p_queue_id, p_result, p_usage, p_dispatch_seq);
    PERFORM set_config('aiqueue.end_lock', 'off', true);
    IF applied THEN
        PERFORM aiqueue_claim_lock();
        PERFORM aiqueue_flow_result(p_queue_id, p_dispatch_seq, p_usage, cap,
                                    tpm > 0 OR rpm > 0 OR aiqueue_plan_budgeted(plan), plan);
        PERFORM aiqueue_money_result(p_queue_id, p_dispatch_seq, p_usage, money);
    ELSE
        SELECT h.* INTO queue_id, submission_id, assignment_id, attempts, dispatch_seq,
                        payload, content, more, breaker_dirty, kind, pool
        FROM aiqueue_handback(p_queue_id, p_dispatch_seq) h;
        IF FOUND THEN
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    SELECT c.* INTO queue_id, submission_id, assignment_id, attempts, dispatch_seq,
                    payload, content, more, breaker_dirty, kind, pool
    FROM aiqueue_claim(cap, breaker_threshold, tpm, rpm, budget_window, plan, money) c;
    IF FOUND THEN
        UPDATE ai_marking_attempts a
        SET next_queue_id = aiqueue_settle.queue_id, next_seq = aiqueue_settle.dispatch_seq
        WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq
          AND a.kind = 'dispatch';
    END IF;
    RETURN NEXT;
END
$$;

-- Apply a result at most once: the row lock plus the status test mean a second
-- (concurrent or later) delivery finds the row completed and changes nothing.
-- A late result of an earlier dispatch still completes a row that is not done.
-- In the same statement: the review record of what the result replaced
-- (ai_marking_results) and one counter delta (ai_marking_tally).
CREATE OR REPLACE FUNCTION aiqueue_complete(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                                 p_dispatch_seq integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH row AS (
        SELECT q.queue_id, q.submission_id, q.assignment_id, q.run_id, q.group_key,
               q.kind, q.pool, date_part('epoch', now() - q.started_at) AS seconds
        FROM ai_marking_queue q
        WHERE q.queue_id = p_queue_id AND q.status IN ('pending', 'processing', 'failed')
        FOR UPDATE
    ),
    -- What the result replaces.  The lock makes this read the newest committed
    -- mark (a revert that committed while we waited), not this statement's
    -- snapshot: the record then says exactly what a revert must restore.
    prev AS (
        SELECT s.id, s.ai_result, s.ai_marked_at
        FROM submissions s JOIN row ON s.id = row.submission_id
        FOR UPDATE OF s
    ),
    sub AS (
        UPDATE submissions s SET ai_result = p_result, ai_marked_at = now()
        FROM prev WHERE s.id = prev.id
        RETURNING s.id
    ),
    done AS (
        UPDATE ai_marking_queue q
        SET status = 'completed', finished_at = now(), last_error = NULL,
            usage = p_usage, updated_at = now(),
            -- A late result of an earlier dispatch: the current one is still at
            -- the function, so the row keeps its slot until that one reports
            -- or its lease runs out; otherwise the function would get one
            -- job more than the cap.
            lease_at = CASE WHEN q.status = 'processing' AND q.dispatch_seq <> p_dispatch_seq
                            THEN q.lease_at END
        FROM row, sub
        WHERE q.queue_id = row.queue_id
        RETURNING q.queue_id
    ),
    history AS (
        UPDATE ai_marking_attempts a
        SET ended_at = now(), usage = p_usage,
            outcome = CASE WHEN a.ended_at IS NULL THEN 'completed' ELSE 'completed_late' END
        FROM done
        WHERE a.queue_id = done.queue_id AND a.dispatch_seq = p_dispatch_seq
          AND a.kind = 'dispatch'
        RETURNING a.outcome
    ),
    usage AS (
        SELECT p_usage ->> 'model' AS model,
               coalesce(aiqueue_usage_int(p_usage -> 'prompt_tokens'), 0) AS prompt_tokens,
               coalesce(aiqueue_usage_int(p_usage -> 'completion_tokens'), 0)
                   AS completion_tokens,
               CASE WHEN jsonb_typeof(p_usage -> 'cost_usd') = 'number'
                    THEN (p_usage ->> 'cost_usd')::numeric END AS cost_usd
    ),
    record AS (
        INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, run_id, "group",
                                        result, previous_result, previous_marked_at, model,
                                        prompt_tokens, completion_tokens, cost_usd,
                                        processing_seconds, kind, pool, lane)
        SELECT row.queue_id, row.submission_id, row.assignment_id, row.run_id, row.group_key,
               p_result, prev.ai_result, prev.ai_marked_at, u.model,
               aiqueue_usage_int(p_usage -> 'prompt_tokens'),
               aiqueue_usage_int(p_usage -> 'completion_tokens'), u.cost_usd, row.seconds,
               row.kind, row.pool,
               -- the overnight lane (0020) marks its usage; everything else is live
               CASE WHEN p_usage ->> 'lane' = 'batch' THEN 'batch' ELSE 'live' END
        FROM row JOIN prev ON prev.id = row.submission_id JOIN done ON true, usage u
        -- A backfilled record (migration 0008) of a row completed before: keep it.
        ON CONFLICT (queue_id) DO NOTHING
    ),
    tally AS (
        INSERT INTO ai_marking_tally (outcome, job, model, le, prompt_tokens, completion_tokens,
                                      cost_usd, seconds)
        SELECT coalesce((SELECT h.outcome FROM history h LIMIT 1), 'completed'), 'completed',
               u.model,
               (SELECT min(b) FROM unnest(aiqueue_buckets()) b WHERE b >= row.seconds),
               u.prompt_tokens, u.completion_tokens, coalesce(u.cost_usd, 0),
               coalesce(row.seconds, 0)
        FROM done, row, usage u
    )
    SELECT count(*) INTO n FROM done;
    IF n = 0 THEN
        -- The current dispatch of a row a late result completed: its slot is free.
        UPDATE ai_marking_queue q SET lease_at = NULL
        WHERE q.queue_id = p_queue_id AND q.status = 'completed'
          AND q.dispatch_seq = p_dispatch_seq AND q.lease_at IS NOT NULL;
    END IF;
    RETURN n > 0;
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

-- A result arrived (no refusal): raise its pool's L, and (`budgeted`: a budget
-- is declared) put the result's reported usage in place of the claim's
-- estimate in the budget window.  The common case (every L at its ceiling, no
-- budget) costs one read of the control rows and writes nothing: this runs
-- once per job.  `cap`: the default pool's, for a call without a plan.
CREATE OR REPLACE FUNCTION aiqueue_flow_result(p_queue_id uuid, p_dispatch_seq integer,
                                               p_usage jsonb, cap integer, budgeted boolean,
                                               plan jsonb DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF NOT budgeted AND NOT EXISTS (SELECT 1 FROM ai_queue_control c
                                    WHERE c.in_flight_limit IS NOT NULL) THEN
        RETURN true;
    END IF;
    UPDATE ai_queue_control c
    SET (in_flight_limit, limit_clean, limit_raised_at) = (
        SELECT r.new_limit, r.new_clean,
               CASE WHEN r.new_limit > c.in_flight_limit THEN now() ELSE c.limit_raised_at END
        FROM aiqueue_flow_after_result(least(c.in_flight_limit, aiqueue_flow_ceiling(t.cap)),
                                       c.limit_clean, aiqueue_flow_ceiling(t.cap),
                                       aiqueue_flow_paced(c)) r)
    FROM (SELECT q.pool, coalesce((aiqueue_plan_pool(plan, q.pool)).cap, cap) AS cap
          FROM ai_marking_queue q WHERE q.queue_id = p_queue_id) t
    WHERE c.pool = t.pool AND c.in_flight_limit IS NOT NULL;
    IF NOT budgeted THEN
        RETURN true;
    END IF;
    -- The claim writes the window too (and prunes it): its lock first (aiqueue 0023).
    PERFORM aiqueue_claim_lock();
    UPDATE ai_marking_budget b
    SET tokens = aiqueue_usage_int(p_usage -> 'prompt_tokens')
                 + aiqueue_usage_int(p_usage -> 'completion_tokens'),
        actual = true
    WHERE b.queue_id = p_queue_id AND b.dispatch_seq = p_dispatch_seq
      AND aiqueue_usage_int(p_usage -> 'prompt_tokens') IS NOT NULL
      AND aiqueue_usage_int(p_usage -> 'completion_tokens') IS NOT NULL;
    RETURN true;
END
$$;

-- A result's usage: the assignment's estimate learns it (a running mean over
-- about its last 20 rows), and it corrects what the row's current dispatch
-- charged: the group's counter by the weighted tokens, the spend windows by
-- the cost (the function's, else priced; unknown: the charge stands).  A
-- group whose spend went down may dispatch again at once (the claim re-reads
-- the windows).  A result without token counts changes nothing.
CREATE OR REPLACE FUNCTION aiqueue_money_result(p_queue_id uuid, p_dispatch_seq integer,
                                                p_usage jsonb, money jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    prompt float8 := aiqueue_usage_int(p_usage -> 'prompt_tokens');
    completion float8 := aiqueue_usage_int(p_usage -> 'completion_tokens');
    model text := p_usage ->> 'model';
    cost float8;
BEGIN
    IF prompt IS NULL AND completion IS NULL THEN
        RETURN;
    END IF;
    prompt := coalesce(prompt, 0);
    completion := coalesce(completion, 0);
    SELECT q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS grp, q.assignment_id,
           q.dispatch_seq, q.charged_tokens, q.charged_usd, q.charged_at
    INTO r FROM ai_marking_queue q WHERE q.queue_id = p_queue_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    cost := CASE WHEN jsonb_typeof(p_usage -> 'cost_usd') = 'number'
                 THEN (p_usage ->> 'cost_usd')::float8
                 ELSE aiqueue_price_usd(money, r.pool, model, prompt, completion) END;
    INSERT INTO ai_marking_estimates AS e (pool, assignment_id, prompt_tokens,
                                           completion_tokens, cost_usd, model, samples)
    VALUES (r.pool, r.assignment_id, prompt, completion, cost, model, 1)
    ON CONFLICT (pool, assignment_id) DO UPDATE
    SET prompt_tokens = e.prompt_tokens
                        + (EXCLUDED.prompt_tokens - e.prompt_tokens) / least(e.samples + 1, 20),
        completion_tokens = e.completion_tokens + (EXCLUDED.completion_tokens
                                                   - e.completion_tokens)
                                                  / least(e.samples + 1, 20),
        cost_usd = CASE WHEN EXCLUDED.cost_usd IS NULL OR e.cost_usd IS NULL
                        THEN coalesce(EXCLUDED.cost_usd, e.cost_usd)
                        ELSE e.cost_usd + (EXCLUDED.cost_usd - e.cost_usd)
                                          / least(e.samples + 1, 20) END,
        model = coalesce(EXCLUDED.model, e.model),
        samples = e.samples + 1, updated_at = now();
    -- A late result of an earlier dispatch: the row's charge is the current
    -- dispatch's, which its own result corrects.
    IF r.dispatch_seq <> p_dispatch_seq OR r.charged_tokens IS NULL THEN
        RETURN;
    END IF;
    -- The counter alone is one row, safe to wait for; with the spend windows
    -- too, the claim's lock first, so they are locked in the claim's order
    -- (aiqueue 0023: a completion no longer holds it from its row's end).
    IF r.charged_usd IS NOT NULL AND cost IS NOT NULL AND cost <> r.charged_usd THEN
        PERFORM aiqueue_claim_lock();
    END IF;
    UPDATE ai_marking_fair f
    SET counter = f.counter + aiqueue_fair_weight(prompt, completion) - r.charged_tokens
    WHERE f.pool = r.pool AND f.priority = r.priority AND f.group_key = r.grp;
    IF r.charged_usd IS NOT NULL AND cost IS NOT NULL AND cost <> r.charged_usd THEN
        PERFORM aiqueue_spend_correct(r.pool, r.grp, cost - r.charged_usd, r.charged_at);
        IF cost < r.charged_usd THEN
            UPDATE ai_marking_fair f SET capped_until = NULL, capped_by = NULL
            WHERE f.pool = r.pool AND f.group_key = r.grp AND f.capped_until IS NOT NULL;
        END IF;
    END IF;
END
$$;

-- The row a first settle of this result claimed, when it is still processing
-- under that claim and nobody has taken it to send (see aiqueue_settle).
-- `more` is false: the repeat only gives back what the first settle took.
-- Its row type grew kind and pool (aiqueue 0019): replaced, not altered.
CREATE OR REPLACE FUNCTION aiqueue_handback(p_queue_id uuid, p_dispatch_seq integer)
RETURNS TABLE (queue_id uuid, submission_id uuid, assignment_id text, attempts integer,
               dispatch_seq integer, payload text, content text, more boolean,
               breaker_dirty boolean, kind text, pool text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT q.queue_id, q.submission_id, q.assignment_id, q.attempts, q.dispatch_seq,
           coalesce(pl.payload, '{}'::jsonb)::text, s.content, false,
           c.consecutive_failures > 0 OR c.circuit_open_until IS NOT NULL,
           q.kind, q.pool
    FROM ai_marking_attempts a
    JOIN ai_marking_queue q ON q.queue_id = a.next_queue_id AND q.dispatch_seq = a.next_seq
    JOIN ai_marking_attempts n ON n.queue_id = q.queue_id AND n.dispatch_seq = q.dispatch_seq
                              AND n.kind = 'dispatch'
    JOIN submissions s ON s.id = q.submission_id
    LEFT JOIN ai_marking_payloads pl ON pl.id = q.payload_id
    -- The breaker of the row's own pool (one control row per pool, aiqueue 0019).
    JOIN ai_queue_control c ON c.pool = q.pool
    WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq AND a.kind = 'dispatch'
      AND q.status = 'processing' AND n.sent_at IS NULL
    LIMIT 1;
END
$$;

-- Take a claimed row to send it: true for the first taker only, so a row a
-- repeated settle handed back is never sent twice.
CREATE OR REPLACE FUNCTION aiqueue_take_handoff(p_queue_id uuid, p_dispatch_seq integer)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ai_marking_attempts a SET sent_at = now()
    WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq
      AND a.kind = 'dispatch' AND a.sent_at IS NULL;
    RETURN FOUND;
END
$$;
