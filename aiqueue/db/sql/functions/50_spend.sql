-- A shared model's money: prices, spend windows, caps, and a charge given back.
--
-- What the rules need of the settings travels with each call as a jsonb
-- `money` (aiqueue/settings/money.py, Money.doc): per pool its caps, its
-- prices and the length of its windows:
--   {"<pool>": {"group_usd_per_hour", "group_usd_per_day", "pool_usd_per_day",
--               "prices": {"<model>": [in, out]}, "top": [in, out],
--               "hour_seconds", "day_seconds", "timezone"}}
-- A pool it does not name has no cap and no price.  `timezone` (an IANA name:
-- the pool's own, else QUEUE_TIMEZONE) says where its days begin (where each
-- window starts and ends: 48_spend_windows.sql).

-- Tokens at a price `pr` ([input, output] USD per million tokens); NULL when
-- `pr` is not one.
CREATE OR REPLACE FUNCTION aiqueue_price_of(pr jsonb, prompt float8, completion float8)
RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(pr) = 'array'
                THEN (prompt * (pr ->> 0)::float8 + completion * (pr ->> 1)::float8) / 1e6 END
$$;

-- Tokens priced at a pool's price for the model, else its most expensive
-- known price ("top"); NULL when the pool knows no price.  One expression, so
-- its callers inline it.
CREATE OR REPLACE FUNCTION aiqueue_price_usd(money jsonb, p_pool text, p_model text,
                                             prompt float8, completion float8)
RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
    SELECT aiqueue_price_of(coalesce(money -> p_pool -> 'prices' -> p_model,
                                     money -> p_pool -> 'top'), prompt, completion)
$$;

-- What a result cost, priced in this one place (the stored usage, the review
-- record, the estimate and the spend windows all take it from here): the
-- function's own cost_usd, else its tokens at the pool's price for its model;
-- NULL: no token count or no price for the model, an unpriced job.  A batch
-- lane's result (docs/overnight.md) is its billed tokens at the pool's batch
-- price (75_batch: declared, else half of live), else half the function's own
-- cost.  `at_top`: the spend windows' charge, where a row without a price
-- counts its tokens at the pool's most expensive known price.  plpgsql: the
-- batch price is defined in a later file.
CREATE OR REPLACE FUNCTION aiqueue_result_cost(p_usage jsonb, money jsonb, p_pool text,
                                               at_top boolean DEFAULT false)
RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    -- The input at billed tokens when the prompt cache counted (45_cache.sql).
    prompt float8 := aiqueue_usage_int(coalesce(p_usage -> 'billed_prompt_tokens',
                                                p_usage -> 'prompt_tokens'));
    completion float8 := aiqueue_usage_int(p_usage -> 'completion_tokens');
    -- Without `at_top`, only the model's own price.
    prices jsonb := CASE WHEN at_top THEN money
                         ELSE jsonb_build_object(p_pool, jsonb_build_object(
                             'prices', money -> p_pool -> 'prices',
                             'batch_prices', money -> p_pool -> 'batch_prices')) END;
    sent float8 := CASE WHEN jsonb_typeof(p_usage -> 'cost_usd') = 'number'
                             AND (p_usage ->> 'cost_usd')::float8 >= 0
                        THEN (p_usage ->> 'cost_usd')::float8 END;
BEGIN
    IF p_usage ->> 'lane' = 'batch' THEN
        RETURN round(CASE WHEN prompt IS NULL AND completion IS NULL THEN sent * 0.5
                          ELSE aiqueue_batch_price_usd(prices, p_pool, p_usage ->> 'model',
                                                       coalesce(prompt, 0),
                                                       coalesce(completion, 0), sent)
                     END::numeric, 9)::float8;
    END IF;
    IF sent IS NOT NULL OR (prompt IS NULL AND completion IS NULL) THEN
        RETURN sent;
    END IF;
    RETURN round(aiqueue_price_usd(prices, p_pool, p_usage ->> 'model', coalesce(prompt, 0),
                                   coalesce(completion, 0))::numeric, 9)::float8;
END
$$;

-- The usage as stored: with its cost_usd when one is known (aiqueue_result_cost).
CREATE OR REPLACE FUNCTION aiqueue_priced(p_usage jsonb, money jsonb, p_pool text)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    cost float8;
BEGIN
    -- With its billed input and what the prompt cache saved (45_cache.sql).
    p_usage := aiqueue_cache_billed(p_usage, money, p_pool);
    cost := aiqueue_result_cost(p_usage, money, p_pool);
    IF cost IS NULL OR p_usage IS NULL THEN
        RETURN p_usage;
    END IF;
    RETURN p_usage || jsonb_build_object('cost_usd', cost);
END
$$;

-- Whether a pool's money plan sets any cap.
CREATE OR REPLACE FUNCTION aiqueue_spend_capped(spec jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(jsonb_typeof(spec -> 'group_usd_per_hour') = 'number'
                    OR jsonb_typeof(spec -> 'group_usd_per_day') = 'number'
                    OR jsonb_typeof(spec -> 'pool_usd_per_day') = 'number', false)
$$;

-- A group's and its pool's spend in the windows that hold now: one probe of
-- the windows' key per window, each the whole key, so the plan can only be
-- that probe (on a table without statistics, a plan of the key's columns as
-- lists read every group's rows of the window through starts_idx).
CREATE OR REPLACE FUNCTION aiqueue_spend_held(spec jsonb, p_pool text, p_group text,
                                              OUT group_hour float8, OUT group_day float8,
                                              OUT pool_day float8)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    hour_at timestamptz := aiqueue_spend_bound(spec, 'hour', now(), 0);
    day_at timestamptz := aiqueue_spend_bound(spec, 'day', now(), 0);
BEGIN
    SELECT coalesce((SELECT s.usd FROM ai_marking_spend s
                     WHERE s.pool = p_pool AND s.group_key = p_group AND s.span = 'hour'
                       AND s.starts_at = hour_at), 0),
           coalesce((SELECT s.usd FROM ai_marking_spend s
                     WHERE s.pool = p_pool AND s.group_key = p_group AND s.span = 'day'
                       AND s.starts_at = day_at), 0),
           coalesce((SELECT s.usd FROM ai_marking_spend s
                     WHERE s.pool = p_pool AND s.group_key = '' AND s.span = 'day'
                       AND s.starts_at = day_at), 0)
    INTO group_hour, group_day, pool_day;
END
$$;

-- The spend of the windows that hold now (aiqueue_spend_held) and when they end.
CREATE OR REPLACE FUNCTION aiqueue_spend_now(spec jsonb, p_pool text, p_group text,
                                             OUT group_hour float8, OUT group_day float8,
                                             OUT pool_day float8, OUT hour_ends timestamptz,
                                             OUT day_ends timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT h.group_hour, h.group_day, h.pool_day INTO group_hour, group_day, pool_day
    FROM aiqueue_spend_held(spec, p_pool, p_group) h;
    hour_ends := aiqueue_spend_bound(spec, 'hour', now(), 1);
    day_ends := aiqueue_spend_bound(spec, 'day', now(), 1);
END
$$;

-- Which cap stops a group's next dispatch now, and until when its window
-- rolls over; NULL: none.  A dispatch goes while the spend is under the cap,
-- so a window overshoots by at most what its dispatches in flight cost.  The
-- window's end is worked out only for a cap that stops (once per settle else).
CREATE OR REPLACE FUNCTION aiqueue_spend_stop(spec jsonb, p_pool text, p_group text,
                                              OUT cap text, OUT until timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    s record;
BEGIN
    IF NOT aiqueue_spend_capped(spec) THEN
        RETURN;
    END IF;
    s := aiqueue_spend_held(spec, p_pool, p_group);
    IF s.pool_day >= (spec ->> 'pool_usd_per_day')::float8 THEN
        cap := 'pool_usd_per_day';
    ELSIF s.group_day >= (spec ->> 'group_usd_per_day')::float8 THEN
        cap := 'group_usd_per_day';
    ELSIF s.group_hour >= (spec ->> 'group_usd_per_hour')::float8 THEN
        cap := 'group_usd_per_hour';
    END IF;
    IF cap IS NOT NULL THEN
        until := aiqueue_spend_bound(spec, CASE WHEN cap = 'group_usd_per_hour' THEN 'hour'
                                                ELSE 'day' END, now(), 1);
    END IF;
END
$$;

-- A dispatch's estimated cost, into the windows that hold `at` (locked in
-- one order: the pool's day, then the group's day and hour).
CREATE OR REPLACE FUNCTION aiqueue_spend_add(spec jsonb, p_pool text, p_group text,
                                             usd float8, at timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    hour_at timestamptz := aiqueue_spend_bound(spec, 'hour', at, 0);
    day_at timestamptz := aiqueue_spend_bound(spec, 'day', at, 0);
BEGIN
    INSERT INTO ai_marking_spend AS s (pool, group_key, span, starts_at, usd)
    SELECT p_pool, w.grp, w.span, w.starts_at, aiqueue_spend_add.usd
    FROM (VALUES (p_group, 'hour', hour_at), (p_group, 'day', day_at), ('', 'day', day_at))
         w (grp, span, starts_at)
    ORDER BY 2, 3
    ON CONFLICT (pool, group_key, span, starts_at) DO UPDATE SET usd = s.usd + EXCLUDED.usd;
END
$$;

-- A result's cost corrects (or a refusal gives back) a dispatch's charge in
-- the windows it went to: the latest of each that started by then (the
-- group's hour and day, the pool's day).
CREATE OR REPLACE FUNCTION aiqueue_spend_correct(p_pool text, p_group text, delta float8,
                                                 at timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ai_marking_spend s SET usd = greatest(s.usd + delta, 0)
    FROM (VALUES (p_group, 'hour'), (p_group, 'day'), ('', 'day')) k (grp, span)
    CROSS JOIN LATERAL (
        SELECT w.starts_at FROM ai_marking_spend w
        WHERE w.pool = p_pool AND w.group_key = k.grp AND w.span = k.span
          AND w.starts_at <= at
        ORDER BY w.starts_at DESC LIMIT 1) w
    WHERE s.pool = p_pool AND s.group_key = k.grp AND s.span = k.span
      AND s.starts_at = w.starts_at;
END
$$;

-- A group reached a spend cap: its rows wait until `until`.  The live pages
-- hear of it once per pause: one `pending` event per assignment, listing the
-- group's pending rows, with why and until when.
CREATE OR REPLACE FUNCTION aiqueue_spend_pause_group(p_pool text, p_group text,
                                                     until timestamptz, cap text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ai_marking_fair f SET capped_until = until, capped_by = cap
    WHERE f.pool = p_pool AND f.group_key = p_group
      AND f.capped_until IS DISTINCT FROM until;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO ai_marking_events (assignment_id, status, queue_ids, submission_ids, summary)
    SELECT q.assignment_id, 'pending', array_agg(q.queue_id), array_agg(q.submission_id),
           jsonb_build_object('waiting_for', 'spend_cap', 'resumes_at', until,
                              'paused_by', cap)
    FROM ai_marking_ready r JOIN ai_marking_queue_live q ON q.queue_id = r.queue_id
    WHERE r.pool = p_pool AND r.grp = p_group AND q.status = 'pending'
    GROUP BY q.assignment_id;
    PERFORM aiqueue_notify();
END
$$;

-- Is a group stopped by a spend cap now?  Then it is paused until its window
-- rolls over (aiqueue_spend_pause_group), and the fair walk steps over it.
CREATE OR REPLACE FUNCTION aiqueue_spend_stopped(spec jsonb, p_pool text, p_group text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    stop record;
BEGIN
    IF NOT aiqueue_spend_capped(spec) THEN
        RETURN false;
    END IF;
    stop := aiqueue_spend_stop(spec, p_pool, p_group);
    IF stop.until IS NULL THEN
        RETURN false;
    END IF;
    PERFORM aiqueue_spend_pause_group(p_pool, p_group, stop.until, stop.cap);
    RETURN true;
END
$$;
