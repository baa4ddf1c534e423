-- What a row is expected to use before its result says (the charge at a claim,
-- the estimate before Mark All), and how a result's usage teaches it.

-- What a row of an assignment is expected to use: the assignment's running
-- mean, else the mean of its pool's 20 most recently used assignments, else a
-- default (750 + 250 tokens, the 1000 of docs/concepts.md).
CREATE OR REPLACE FUNCTION aiqueue_estimate(p_pool text, p_assignment_id text,
                                            OUT prompt_tokens float8,
                                            OUT completion_tokens float8,
                                            OUT cost_usd float8, OUT model text,
                                            OUT source text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    SELECT e.prompt_tokens, e.completion_tokens, e.cost_usd, e.model, 'assignment'
    INTO prompt_tokens, completion_tokens, cost_usd, model, source
    FROM ai_marking_estimates e WHERE e.pool = p_pool AND e.assignment_id = p_assignment_id;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT avg(r.prompt_tokens), avg(r.completion_tokens), avg(r.cost_usd),
           (array_agg(r.model ORDER BY r.updated_at DESC))[1], 'pool'
    INTO prompt_tokens, completion_tokens, cost_usd, model, source
    FROM (SELECT e.* FROM ai_marking_estimates e WHERE e.pool = p_pool
          ORDER BY e.updated_at DESC LIMIT 20) r
    HAVING count(*) > 0;
    IF FOUND THEN
        RETURN;
    END IF;
    prompt_tokens := 750;
    completion_tokens := 250;
    source := 'default';
END
$$;

-- The assignment's estimate learns a result's usage: a running mean over about
-- its last 20 rows (aiqueue_estimate reads it).  Once a minute at most it
-- moves the estimate's place among the pool's recent ones.  plpgsql: a SQL function's
-- statement is planned again in every transaction, a plpgsql one's is kept.
CREATE OR REPLACE FUNCTION aiqueue_estimate_learn(p_pool text, p_assignment_id text,
                                                  prompt float8, completion float8,
                                                  cost float8, model text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_estimates AS e (pool, assignment_id, prompt_tokens,
                                           completion_tokens, cost_usd, model, samples)
    VALUES (p_pool, p_assignment_id, prompt, completion, cost, model, 1)
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
        -- When it was last learned, to the minute: the pool's fallback reads the
        -- most recent (ai_marking_estimates_recent_idx), and an update that
        -- leaves every indexed column as it was is heap-only (no index entry).
        samples = e.samples + 1,
        updated_at = CASE WHEN e.updated_at < now() - interval '1 minute' THEN now()
                          ELSE e.updated_at END;
END
$$;
