-- Where a row's history starts: the lower bound of the months a lookup of its
-- attempts or results reads (they are month partitions: 97_partitions.sql).
-- An attempt never starts, and a result is never applied, before its row was
-- created; the day's margin keeps a row whose times were moved by hand (a
-- restore, a clock step) reachable, at the cost of at most one more month
-- looked at.  Inlined, so the planner prunes the months before it.
CREATE OR REPLACE FUNCTION aiqueue_months_from(created timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT created - interval '1 day'
$$;
