-- Budget warnings (docs/fallback-budgets-calendar.md): before a spend cap is reached, not after.
--
-- Each spend cap of each pool (`money`, as in 50_spend.sql) is looked at in
-- the windows that hold `p_now`: a group's hour and day, the pool's day.  The
-- first time a window's spend passes 80 % of its cap, and again at 95 %,
-- `marking.budget_warning` goes to the outbox, in the transaction that
-- remembers it in ai_marking_budget_warnings: once per cap, pool, group,
-- window and threshold, however many instances evaluate.  A spend that jumps
-- past both at once sends both.  Answers the warnings it sent.
CREATE OR REPLACE FUNCTION aiqueue_budget_warnings(money jsonb, p_now timestamptz)
RETURNS TABLE (cap text, pool text, group_key text, threshold float8)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    t timestamptz := coalesce(p_now, now());
BEGIN
    IF money IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH caps AS (
        SELECT m.key AS pool, c.cap, c.span, c.grouped, (m.value ->> c.cap)::float8 AS limit_usd,
               w.starts_at, w.ends_at
        FROM jsonb_each(money) m
        CROSS JOIN (VALUES ('group_usd_per_hour', 'hour', true),
                           ('group_usd_per_day', 'day', true),
                           ('pool_usd_per_day', 'day', false)) c (cap, span, grouped)
        CROSS JOIN LATERAL aiqueue_spend_window(m.value, c.span, t) w
        WHERE jsonb_typeof(m.value -> c.cap) = 'number' AND (m.value ->> c.cap)::float8 > 0
    ),
    near AS (
        SELECT c.cap, c.pool, s.group_key, th.threshold, s.usd, c.limit_usd, c.starts_at,
               c.ends_at
        FROM caps c
        JOIN ai_marking_spend s
          ON s.pool = c.pool AND s.span = c.span AND s.starts_at = c.starts_at
         AND (s.group_key <> '') = c.grouped
        CROSS JOIN (VALUES (0.8::float8), (0.95::float8)) th (threshold)
        WHERE s.usd >= th.threshold * c.limit_usd
    ),
    fresh AS (
        INSERT INTO ai_marking_budget_warnings AS b (cap, pool, group_key, window_start,
                                                     threshold)
        SELECT n.cap, n.pool, n.group_key, n.starts_at, n.threshold FROM near n
        ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT DO NOTHING
        RETURNING b.cap, b.pool, b.group_key, b.window_start, b.threshold
    ),
    sent AS (
        INSERT INTO ai_marking_outbox (type, assignment_id, body)
        SELECT 'marking.budget_warning', '', jsonb_build_object(
                   'type', 'marking.budget_warning', 'cap', n.cap, 'pool', n.pool,
                   'group', nullif(n.group_key, ''), 'threshold', n.threshold,
                   'spent_usd', round(n.usd::numeric, 6), 'limit_usd', n.limit_usd,
                   'window_ends_at', n.ends_at)
        FROM fresh f JOIN near n
          ON n.cap = f.cap AND n.pool = f.pool AND n.group_key = f.group_key
         AND n.starts_at = f.window_start AND n.threshold = f.threshold
        ORDER BY n.pool, n.cap, n.group_key, n.threshold
    )
    SELECT f.cap, f.pool, f.group_key, f.threshold FROM fresh f;
    -- Windows long past are forgotten (their spend is pruned after two days too).
    DELETE FROM ai_marking_budget_warnings b WHERE b.sent_at < t - interval '3 days';
END
$$;

-- The groups (and pools) whose spend is at 80 % of a cap or more in the
-- windows that hold now, nearest first (/ai-queue's "near a cap").
CREATE OR REPLACE FUNCTION aiqueue_budget_near(money jsonb)
RETURNS TABLE (cap text, pool text, group_key text, spent_usd float8, limit_usd float8,
               window_ends_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT c.cap, c.pool, nullif(s.group_key, ''), s.usd, c.limit_usd, c.ends_at
    FROM (SELECT m.key AS pool, c.cap, c.span, c.grouped,
                 (m.value ->> c.cap)::float8 AS limit_usd, w.starts_at, w.ends_at
          FROM jsonb_each(coalesce(money, '{}'::jsonb)) m
          CROSS JOIN (VALUES ('group_usd_per_hour', 'hour', true),
                             ('group_usd_per_day', 'day', true),
                             ('pool_usd_per_day', 'day', false)) c (cap, span, grouped)
          CROSS JOIN LATERAL aiqueue_spend_window(m.value, c.span, now()) w
          WHERE jsonb_typeof(m.value -> c.cap) = 'number'
            AND (m.value ->> c.cap)::float8 > 0) c
    JOIN ai_marking_spend s
      ON s.pool = c.pool AND s.span = c.span AND s.starts_at = c.starts_at
     AND (s.group_key <> '') = c.grouped
    WHERE s.usd >= 0.8 * c.limit_usd
    ORDER BY s.usd / c.limit_usd DESC, c.pool, s.group_key
    LIMIT 50
$$;
