-- The overnight lane's money: a batch's price, charge and refund.

-- The overnight lane (docs/overnight.md) packs rows into a provider batch: each is charged
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
        UPDATE ai_marking_fair f
        SET counter = f.counter + c.tokens,
            (walk_key, walk_turn, walk_seq) = (
                SELECT k.* FROM aiqueue_fair_key(f, f.waiting, f.counter + c.tokens,
                                                 f.head_turn, f.head_seq) k),
            updated_at = now()
        WHERE f.pool = c.pool AND f.priority = c.priority AND f.group_key = c.grp;
        IF c.usd IS NOT NULL THEN
            PERFORM aiqueue_spend_add(money -> c.pool, c.pool, c.grp, c.usd, now());
        END IF;
        UPDATE ai_marking_queue q SET charged_tokens = x.tokens, charged_usd = x.usd,
                                      charged_at = now()
        FROM unnest(c.ids, c.each_tokens, c.each_usd) AS x (queue_id, tokens, usd)
        WHERE q.queue_id = x.queue_id
          AND q.status IN ('pending', 'processing');  -- the live part alone (aiqueue 0078)
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

-- Packing's choice (batch.sql: batch_open, batch_add): up to p_limit waiting rows of
-- pool p_pool's batch lane, locked (SKIP LOCKED), in the lane's order.  Rows whose
-- live time has come (run_after <= now()) are the live claim's; a follower of the
-- same answer waits for its leader (run_after 'infinity', 72_groups.sql), a row held
-- for its run's calibration for the release, a not_before for its
-- moment, and a group at a spend cap (docs/concepts.md; `money`, the plan's) for its window, as
-- on the live lane.  Every chunk of a batch is chosen by this one rule.
CREATE OR REPLACE FUNCTION aiqueue_batch_pick(p_pool text, p_limit integer, money jsonb)
RETURNS SETOF uuid LANGUAGE sql AS $$
    SELECT q.queue_id
    FROM ai_marking_ready r JOIN ai_marking_queue_live q ON q.queue_id = r.queue_id
    WHERE r.lane = 'batch' AND r.pool = p_pool
      AND r.run_after > now() AND r.run_after < 'infinity'
      AND (r.not_before IS NULL OR r.not_before <= now())
      AND (NOT aiqueue_spend_capped(money -> p_pool)
           OR (aiqueue_spend_stop(money -> p_pool, p_pool, r.grp)).until IS NULL)
      -- Tested on the record's locked version too (a row moved meanwhile is stepped over).
      AND q.status = 'pending' AND q.lane = 'batch' AND q.held_run_after IS NULL
    ORDER BY r.priority DESC, r.seq
    LIMIT p_limit
    FOR UPDATE OF q SKIP LOCKED
$$;

-- Rows `ids` (locked by aiqueue_batch_pick) move into batch p_batch: processing,
-- with no lease (a batch holds no slot of L), an attempt used as a dispatch uses
-- one, and the attempt's line naming the batch; then what follows the move
-- (74_moved.sql: their live events and count deltas).  What the render needs of each,
-- by cache key (the payload's hash, docs/prompt-cache.md), so a prefix's requests sit
-- together in the batch.
CREATE OR REPLACE FUNCTION aiqueue_batch_move(ids uuid[], p_batch bigint)
RETURNS TABLE (batch_id bigint, queue_id uuid, submission_id uuid, assignment_id text,
               attempts integer, dispatch_seq integer, deadline timestamptz, kind text,
               payload text, content text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH moved AS (
        UPDATE ai_marking_queue q
        SET status = 'processing', attempts = q.attempts + 1,
            dispatch_seq = q.dispatch_seq + 1, started_at = now(),
            progress = NULL, batch_id = p_batch, charged_tokens = NULL, charged_usd = NULL,
            updated_at = now(), queue_moves = q.queue_moves + 1
        WHERE q.queue_id = ANY (ids)
        RETURNING q.queue_id, q.submission_id, q.assignment_id, q.attempts, q.dispatch_seq,
                  q.payload_id, q.deadline, q.kind, q AS moved
    ),
    followed AS (
        SELECT aiqueue_feed_moved(array_agg(m.moved)),
               aiqueue_counts_moved(array_agg(m.moved),
                                    array_fill('pending'::text, ARRAY[count(*)::int]))
        FROM moved m
    ),
    history AS (
        INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt, dispatch_ref)
        SELECT m.queue_id, m.dispatch_seq, m.attempts, 'batch:' || p_batch FROM moved m
    )
    SELECT p_batch, m.queue_id, m.submission_id, m.assignment_id, m.attempts, m.dispatch_seq,
           m.deadline, m.kind, coalesce(pl.payload, '{}'::jsonb)::text, s.content
    FROM moved m CROSS JOIN followed JOIN submissions s ON s.id = m.submission_id
    LEFT JOIN ai_marking_payloads pl ON pl.id = m.payload_id
    ORDER BY pl.sha256 NULLS FIRST, m.queue_id;
END
$$;
