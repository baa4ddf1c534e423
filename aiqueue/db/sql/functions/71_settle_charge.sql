-- The settle's after-result writes, in call order: L rises, the charge is corrected,
-- each given the completed row; and a repeated result's hand-back (70_settle.sql
-- calls them).

-- A result arrived (no refusal): raise its pool's L, and (a budget is
-- declared: the plan's `budgeted`) put the result's reported usage in place of
-- the claim's estimate in the budget window (in place: a heap-only update,
-- aiqueue 0032).  `d`: the completed row (aiqueue_complete).  The common case
-- (its pool's L at the ceiling, no budget) costs one read of the pool's
-- control row and writes nothing: this runs once per job.  The caller holds
-- the claim lock (aiqueue_result).
CREATE OR REPLACE FUNCTION aiqueue_flow_result(d ai_marking_queue, p_dispatch_seq integer,
                                               plan jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    budgeted boolean := coalesce((plan ->> 'budgeted')::boolean, false);
    prompt bigint;
    completion bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM ai_queue_control c
               WHERE c.pool = d.pool AND c.in_flight_limit IS NOT NULL) THEN
        UPDATE ai_queue_control c
        SET (in_flight_limit, limit_clean, limit_raised_at) = (
            SELECT r.new_limit, r.new_clean,
                   CASE WHEN r.new_limit > c.in_flight_limit THEN now()
                        ELSE c.limit_raised_at END
            FROM aiqueue_flow_after_result(least(c.in_flight_limit, aiqueue_flow_ceiling(t.cap)),
                                           c.limit_clean, aiqueue_flow_ceiling(t.cap),
                                           aiqueue_flow_paced(c)) r),
            -- A result ends the pool's run of refusals (a refusal cut L, so it runs
            -- here): its kinds' rows stay home from their fallback.
            refused_since = NULL
        FROM (SELECT (aiqueue_plan_pool(plan, d.pool)).cap AS cap) t
        WHERE c.pool = d.pool AND c.in_flight_limit IS NOT NULL;
    END IF;
    IF NOT budgeted THEN
        RETURN true;
    END IF;
    prompt := aiqueue_usage_int(d.usage -> 'prompt_tokens');
    completion := aiqueue_usage_int(d.usage -> 'completion_tokens');
    IF prompt IS NOT NULL AND completion IS NOT NULL THEN
        UPDATE ai_marking_budget b SET tokens = prompt + completion, actual = true
        WHERE b.queue_id = d.queue_id AND b.dispatch_seq = p_dispatch_seq;
    END IF;
    RETURN true;
END
$$;

-- A result's usage (`d`: the completed row, its usage as aiqueue_complete
-- priced and stored it, once): the prompt cache learns it
-- (aiqueue_cache_result), the assignment's estimate learns it
-- (aiqueue_estimate_learn), and it corrects what the row's current dispatch
-- charged: the group's counter by the weighted tokens, the spend windows by the
-- cost (as stored, else at the pool's top price; no price at all: the charge
-- stands).  A group whose spend went down may dispatch again at once (the claim
-- re-reads the windows).  A result without token counts changes nothing else.
-- The caller holds the claim lock.  True when the usage had token counts.
CREATE OR REPLACE FUNCTION aiqueue_money_result(d ai_marking_queue, p_dispatch_seq integer,
                                                money jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    grp text := coalesce(d.group_key, d.assignment_id);
    -- The input at billed tokens (cache reads and writes at their price).
    prompt float8 := coalesce(aiqueue_usage_int(d.usage -> 'billed_prompt_tokens'),
                              aiqueue_usage_int(d.usage -> 'prompt_tokens'));
    completion float8 := aiqueue_usage_int(d.usage -> 'completion_tokens');
    cost float8 := CASE WHEN jsonb_typeof(d.usage -> 'cost_usd') = 'number'
                        THEN (d.usage ->> 'cost_usd')::float8 END;
BEGIN
    PERFORM aiqueue_cache_result(d);
    IF prompt IS NULL AND completion IS NULL THEN
        RETURN false;
    END IF;
    -- Unpriced, it is charged at the pool's most expensive known price (docs/concepts.md);
    -- a pool `money` does not name has no price (50_spend.sql).
    IF cost IS NULL AND money ? d.pool THEN
        cost := aiqueue_result_cost(d.usage, money, d.pool, true);
    END IF;
    PERFORM aiqueue_estimate_learn(d.pool, d.assignment_id, coalesce(prompt, 0),
                                   coalesce(completion, 0), cost, d.usage ->> 'model');
    -- A late result of an earlier dispatch: the row's charge is the current
    -- dispatch's, which its own result corrects.
    IF d.dispatch_seq <> p_dispatch_seq OR d.charged_tokens IS NULL THEN
        RETURN true;
    END IF;
    UPDATE ai_marking_fair f
    SET counter = f.counter + c.delta,
        (walk_key, walk_turn, walk_seq) = (
            SELECT k.* FROM aiqueue_fair_key(f, f.waiting, f.counter + c.delta, f.head_turn,
                                             f.head_seq) k)
    FROM (SELECT aiqueue_fair_weight(coalesce(prompt, 0), coalesce(completion, 0))
                 - d.charged_tokens AS delta) c
    WHERE f.pool = d.pool AND f.priority = d.priority AND f.group_key = grp;
    IF d.charged_usd IS NOT NULL AND cost IS NOT NULL AND cost <> d.charged_usd THEN
        PERFORM aiqueue_spend_correct(d.pool, grp, cost - d.charged_usd, d.charged_at);
        IF cost < d.charged_usd THEN
            UPDATE ai_marking_fair f SET capped_until = NULL, capped_by = NULL
            WHERE f.pool = d.pool AND f.group_key = grp AND f.capped_until IS NOT NULL;
        END IF;
    END IF;
    RETURN true;
END
$$;

-- The row a first settle of this result claimed, when it is still processing
-- under that claim and was taken by this caller (see aiqueue_settle).  Rows a
-- settle claimed before hand-offs were taken in the settle (aiqueue 0024) are
-- handed to whoever asks while unsent.  `more` is false: the repeat only gives
-- back what the first settle took.
CREATE OR REPLACE FUNCTION aiqueue_handback(p_queue_id uuid, p_dispatch_seq integer,
                                            p_taker uuid)
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
    JOIN ai_marking_queue_live q ON q.queue_id = a.next_queue_id AND q.dispatch_seq = a.next_seq
    JOIN ai_marking_attempts n ON n.queue_id = q.queue_id AND n.dispatch_seq = q.dispatch_seq
                              AND n.kind = 'dispatch'
    JOIN submissions s ON s.id = q.submission_id
    LEFT JOIN ai_marking_payloads pl ON pl.id = q.payload_id
    -- The breaker of the row's own pool (one control row per pool, aiqueue 0019).
    JOIN ai_queue_control c ON c.pool = q.pool
    WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq AND a.kind = 'dispatch'
      AND q.status = 'processing'
      AND (n.taken_by = p_taker OR (n.taken_by IS NULL AND n.sent_at IS NULL))
    LIMIT 1;
END
$$;
