-- Usage summed by the hour (functions/96_usage_hours.sql): /ai-queue's cost card
-- adds up 30 days of results on every paint, which at a district's size (10
-- million results a year) is most of the page's time.  A closed hour's sums
-- never change while its results stay, so the housekeeping sums each hour once,
-- per model and lane, and the card reads those rows and sums only the hours
-- not held here from the results.  Figures only: no ids, no content.
CREATE TABLE ai_marking_usage_hours (
    hour timestamptz NOT NULL,
    -- Both NULL: the hour's marker row, present once the hour is summed (also
    -- when it had no result).
    model text,
    lane text,
    jobs bigint NOT NULL,
    unpriced_jobs bigint NOT NULL,
    prompt_tokens bigint NOT NULL,
    completion_tokens bigint NOT NULL,
    cost_usd numeric,
    cache_read_tokens bigint NOT NULL,
    cache_write_tokens bigint NOT NULL,
    cache_saved_tokens bigint NOT NULL,
    cache_saved_usd float8
);
CREATE INDEX ai_marking_usage_hours_hour_idx ON ai_marking_usage_hours (hour);
CREATE UNIQUE INDEX ai_marking_usage_hours_summed_idx ON ai_marking_usage_hours (hour)
    WHERE lane IS NULL;
