-- Where a spend window starts and ends (50_spend.sql counts what it holds).
--
-- A pool's money plan (`spec`, as in 50_spend.sql) may set `hour_seconds`,
-- `day_seconds` (a test's short windows) and `timezone` (where its days
-- begin).

-- The UTC clock window of `len` seconds that holds `at` (an hour, a day).
-- STABLE as its extract() is, so that its callers inline it.
CREATE OR REPLACE FUNCTION aiqueue_window_start(len float8, at timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT to_timestamp(floor(extract(epoch FROM at) / len) * len)
$$;

-- The length in seconds of a pool's `span` ('hour' | 'day') window.
CREATE OR REPLACE FUNCTION aiqueue_spend_len(spec jsonb, span text) RETURNS float8
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce((spec ->> (span || '_seconds'))::float8,
                    CASE WHEN span = 'hour' THEN 3600 ELSE 86400 END)
$$;

-- Where the spend window of `span` that holds `at` starts (`later` 0) or ends
-- (1).  Hours are clock hours.  A day starts at midnight in the pool's
-- timezone (a day across a daylight-saving change is 23 or 25 hours long); a
-- window length other than a day's (a test's short windows) is counted from
-- the epoch.  One expression, so a plpgsql caller evaluates it inline.
CREATE OR REPLACE FUNCTION aiqueue_spend_bound(spec jsonb, span text, at timestamptz,
                                               later integer)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN span = 'day' AND aiqueue_spend_len(spec, span) = 86400
                     AND spec ->> 'timezone' IS NOT NULL AND spec ->> 'timezone' <> 'UTC'
                THEN (date_trunc('day', at AT TIME ZONE (spec ->> 'timezone'))
                      + later * interval '1 day') AT TIME ZONE (spec ->> 'timezone')
                ELSE aiqueue_window_start(aiqueue_spend_len(spec, span), at)
                     + later * make_interval(secs => aiqueue_spend_len(spec, span)) END
$$;

-- The spend window of `span` ('hour' | 'day') that holds `at`, and its end
-- (aiqueue_spend_bound).
CREATE OR REPLACE FUNCTION aiqueue_spend_window(spec jsonb, span text, at timestamptz,
                                                OUT starts_at timestamptz,
                                                OUT ends_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    starts_at := aiqueue_spend_bound(spec, span, at, 0);
    ends_at := aiqueue_spend_bound(spec, span, at, 1);
END
$$;
