-- The overnight lane's money: a batch's price, charge and refund.

-- The overnight lane (§9f) packs rows into a provider batch: each is charged
-- like a dispatch, to its group's counter (its estimated weighted tokens) and,
-- where its pool has a cap, to the spend windows, at the pool's batch prices
-- (`money` -> pool -> 'batch_prices' / 'batch_top': declared, else half of
-- live; an estimate without a known price: half its recorded cost).  The
-- result's usage (priced at the batch price by the lane) corrects the charge
-- as for a live result (aiqueue_money_result).
-- Tokens priced at a pool's batch prices (declared, else half of live), else
-- half of `recorded` (a cost the function reported); NULL: nothing known.
CREATE OR REPLACE FUNCTION aiqueue_batch_price_usd(money jsonb, p_pool text, p_model text,
                                                   prompt float8, completion float8,
                                                   recorded float8)
RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(
        aiqueue_price_usd(jsonb_build_object(p_pool, jsonb_build_object(
                              'prices', money -> p_pool -> 'batch_prices',
                              'top', money -> p_pool -> 'batch_top')),
                          p_pool, p_model, prompt, completion),
        recorded * 0.5)
$$;

-- p_ids: only these rows (the chunk just taken); NULL: all the batch holds.
CREATE OR REPLACE FUNCTION aiqueue_batch_charge(p_batch bigint, money jsonb,
                                                p_ids uuid[] DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    -- Counters and spend windows (the pool's day among them) are the claim's rows
    -- too: its lock first, so they are locked in its order (aiqueue 0023).
    PERFORM aiqueue_claim_lock();
    -- One group at a time, in key order, as the claim and the enqueue lock groups.
    FOR c IN
        SELECT r.pool, r.priority, r.grp, sum(r.tokens) AS tokens, sum(r.usd) AS usd,
               array_agg(r.queue_id) AS ids, array_agg(r.tokens) AS each_tokens,
               array_agg(r.usd) AS each_usd
        FROM (SELECT q.queue_id, q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS grp,
                     aiqueue_fair_weight(e.prompt_tokens, e.completion_tokens) AS tokens,
                     CASE WHEN aiqueue_spend_capped(money -> q.pool) THEN
                         aiqueue_batch_price_usd(money, q.pool, e.model, e.prompt_tokens,
                                                 e.completion_tokens, e.cost_usd) END AS usd
              FROM ai_marking_queue q
              CROSS JOIN LATERAL aiqueue_estimate(q.pool, q.assignment_id) e
              WHERE q.batch_id = p_batch AND q.status = 'processing'
                AND (p_ids IS NULL OR q.queue_id = ANY (p_ids))) r
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    LOOP
        UPDATE ai_marking_fair f SET counter = f.counter + c.tokens, updated_at = now()
        WHERE f.pool = c.pool AND f.priority = c.priority AND f.group_key = c.grp;
        IF c.usd IS NOT NULL THEN
            PERFORM aiqueue_spend_add(money -> c.pool, c.pool, c.grp, c.usd, now());
        END IF;
        UPDATE ai_marking_queue q SET charged_tokens = x.tokens, charged_usd = x.usd,
                                      charged_at = now()
        FROM unnest(c.ids, c.each_tokens, c.each_usd) AS x (queue_id, tokens, usd)
        WHERE q.queue_id = x.queue_id;
    END LOOP;
END
$$;

-- Rows leave batch `p_batch` unpaid (`p_ids`; NULL: all it still holds): what
-- packing charged them is given back, one group at a time (aiqueue_uncharge, as
-- for one refused row), so that a batch of thousands is one short statement.
CREATE OR REPLACE FUNCTION aiqueue_batch_refund(p_batch bigint, p_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    IF EXISTS (SELECT FROM ai_marking_queue q
               WHERE q.batch_id = p_batch AND q.status = 'processing'
                 AND q.charged_usd IS NOT NULL) THEN
        PERFORM aiqueue_claim_lock();
    END IF;
    FOR c IN
        SELECT q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS grp,
               sum(q.charged_tokens) AS tokens, sum(q.charged_usd) AS usd,
               min(q.charged_at) AS charged_at, array_agg(q.queue_id) AS ids
        FROM ai_marking_queue q
        WHERE q.batch_id = p_batch AND q.status = 'processing' AND q.charged_tokens IS NOT NULL
          AND (p_ids IS NULL OR q.queue_id = ANY (p_ids))
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    LOOP
        PERFORM aiqueue_uncharge(c.pool, c.priority, c.grp, c.tokens, c.usd, c.charged_at,
                                 c.ids);
    END LOOP;
END
$$;

-- The tag a batch's provider objects carry (OpenAI: the batch's metadata and the
-- input file's name): the deployment's own id (aiqueue_meta, migration 0025)
-- and the record's, so that no other deployment on the same account matches it.
CREATE OR REPLACE FUNCTION aiqueue_batch_tag(p_batch bigint) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT 'aiqueue-' || coalesce((SELECT left(value, 16) FROM aiqueue_meta
                                   WHERE key = 'deployment'), 'local') || '-' || p_batch
$$;
