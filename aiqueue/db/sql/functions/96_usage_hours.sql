-- Usage by the hour (ai_marking_usage_hours, migration 0064): what /ai-queue's
-- cost card reads instead of 30 days of results (sql/usage.sql usage_card).
--
-- An hour is summed once it is closed: its end at least 15 minutes ago.  A
-- result's applied_at is its transaction's start, and the app's transactions
-- last seconds (db/pool.py Limits), so no result of a summed hour commits
-- later.  Its sums stay right while its results stay: the card leaves out an
-- hour older than the results' keep period (retention may have deleted from
-- it), and an erasure takes the hours of the results it deletes out of here
-- (sql/erasure.sql) for the next pass to sum again.  Only the card's window is
-- kept: the last 32 days (30 days before today, in any time zone).

-- Sum at most `p_hours` closed hours not summed yet, newest first, of the last
-- 32 days and within the results' keep period (`p_kept_seconds`); forget older
-- hours.  The number of hours summed.  Called by the history's housekeeping pass
-- (aiqueue_keep_partitions, once a minute across instances): two days a pass
-- keeps a pass short (about 55,000 results at 10 million a year), and the 32
-- days after an upgrade are summed within 16 minutes (until then the card sums
-- those hours from the results: the same figures, slower).
CREATE OR REPLACE FUNCTION aiqueue_usage_roll(p_kept_seconds float8, p_hours integer DEFAULT 48)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    lo timestamptz := date_bin('1 hour', greatest(now() - interval '32 days',
                                                  now() - make_interval(secs => p_kept_seconds)),
                               TIMESTAMPTZ 'epoch') + interval '1 hour';
    hi timestamptz := date_bin('1 hour', now() - interval '15 minutes', TIMESTAMPTZ 'epoch');
    todo timestamptz[];
BEGIN
    DELETE FROM ai_marking_usage_hours WHERE hour < lo;
    todo := ARRAY(SELECT h FROM generate_series(lo, hi - interval '1 hour', interval '1 hour') h
                  WHERE NOT EXISTS (SELECT 1 FROM ai_marking_usage_hours u
                                    WHERE u.hour = h AND u.lane IS NULL)
                  ORDER BY h DESC LIMIT p_hours);
    IF cardinality(todo) = 0 THEN
        RETURN 0;
    END IF;
    -- The same sums as usage_report's (NULL costs stay NULL when none is priced).
    INSERT INTO ai_marking_usage_hours (hour, model, lane, jobs, unpriced_jobs, prompt_tokens,
                                        completion_tokens, cost_usd, cache_read_tokens,
                                        cache_write_tokens, cache_saved_tokens, cache_saved_usd)
    SELECT date_bin('1 hour', m.applied_at, TIMESTAMPTZ 'epoch'), coalesce(m.model, 'unknown'),
           m.lane, count(*), count(*) FILTER (WHERE m.cost_usd IS NULL),
           coalesce(sum(m.prompt_tokens), 0), coalesce(sum(m.completion_tokens), 0),
           sum(m.cost_usd), coalesce(sum(m.cache_read_tokens), 0),
           coalesce(sum(m.cache_write_tokens), 0), coalesce(sum(m.cache_saved_tokens), 0),
           sum(m.cache_saved_usd)
    FROM ai_marking_results m
    WHERE m.applied_at >= (SELECT min(t) FROM unnest(todo) t)
      AND m.applied_at < (SELECT max(t) FROM unnest(todo) t) + interval '1 hour'
      AND date_bin('1 hour', m.applied_at, TIMESTAMPTZ 'epoch') = ANY (todo)
    GROUP BY 1, 2, 3;
    INSERT INTO ai_marking_usage_hours (hour, jobs, unpriced_jobs, prompt_tokens,
                                        completion_tokens, cache_read_tokens,
                                        cache_write_tokens, cache_saved_tokens)
    SELECT t, 0, 0, 0, 0, 0, 0, 0 FROM unnest(todo) t;
    RETURN cardinality(todo);
END
$$;
