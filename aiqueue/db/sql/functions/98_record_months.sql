-- The record's months (aiqueue 0078, docs/operating/data-protection.md,
-- "Retention by the month"): a row's end moves it from ai_marking_queue_live to
-- ai_marking_queue_ended, range-partitioned by the month the row was created.
-- A month goes whole, detached and dropped, once every row of it is past its
-- period (a retry moves a row back to the live table); until then the row-by-row pass
-- (sql/queue.sql prune, sql/records.sql retain) removes each row as it passes
-- its own, so no row is kept longer than its period.  A month's drop takes
-- with it what pointed at its rows: their count deltas (ai_marking_counts rows
-- of that month's ended statuses) and their traces.  Called by aiqueue_keep_partitions
-- (97_partitions.sql), with its lock_timeout.

-- The month of a count delta: the month its row was created in (UTC), the
-- partition that holds the row.
CREATE OR REPLACE FUNCTION aiqueue_count_month(p_created timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT date_trunc('month', p_created AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
$$;

-- A row enters the ended rows with an end time: one ended by hand (host SQL or
-- an operator setting its status: PostgreSQL moves it to its month as a delete
-- and an insert) or written there by host SQL without one gets it now.
-- Retention goes by a row's end (docs/operating/data-protection.md), so without
-- one it was kept for ever, and its month with every newer one.  Its WHEN leaves
-- aiqueue's own ends (each sets finished_at) without a call.
CREATE OR REPLACE FUNCTION aiqueue_ended_untimed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.finished_at := now();
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER ai_marking_queue_ended_untimed
    BEFORE INSERT ON ai_marking_queue_ended
    FOR EACH ROW WHEN (NEW.finished_at IS NULL) EXECUTE FUNCTION aiqueue_ended_untimed();

-- Whether a month of the ended rows still holds one within its period, or one
-- with no end time (ended by an earlier version without one, or given none by
-- host SQL since: its period cannot be told, so it is kept).  Each an index probe: the first two of
-- finished_idx, the third of unfinished_idx (aiqueue 0079), which holds only
-- those rows; its status test is that index's predicate.
CREATE OR REPLACE FUNCTION aiqueue_record_month_kept(p_part regclass, p_completed_seconds float8,
                                                     p_ended_seconds float8)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    kept boolean;
BEGIN
    EXECUTE format(
        'SELECT EXISTS (SELECT 1 FROM %1$s WHERE phase = ''completed'' AND finished_at >= $1)'
        '    OR EXISTS (SELECT 1 FROM %1$s WHERE phase IN (''failed'', ''cancelled'', ''expired'')'
        '                                    AND finished_at >= $2)'
        '    OR EXISTS (SELECT 1 FROM %1$s WHERE finished_at IS NULL'
        '                                    AND status NOT IN (''pending'', ''processing''))',
        p_part)
        INTO kept
        USING now() - make_interval(secs => p_completed_seconds),
              now() - make_interval(secs => p_ended_seconds);
    RETURN kept;
END
$$;

-- Drop the record's months whose rows are all past their periods, oldest
-- first, stopping at the first that still keeps a row (so the months left are
-- always the newest: aiqueue_record_gone_before reads the oldest).  How many went.
CREATE OR REPLACE FUNCTION aiqueue_record_months_drop(p_completed_seconds float8,
                                                      p_ended_seconds float8)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    part record;
    n integer := 0;
BEGIN
    IF p_completed_seconds IS NULL OR p_ended_seconds IS NULL THEN
        RETURN 0;
    END IF;
    FOR part IN
        SELECT x.part, x.lower_bound, x.upper_bound FROM aiqueue_partitions() x
        WHERE x.parent = 'ai_marking_queue_ended'::regclass AND NOT x.is_default
          AND x.upper_bound <= now() - make_interval(secs => least(p_completed_seconds,
                                                                   p_ended_seconds))
        ORDER BY x.upper_bound
    LOOP
        EXIT WHEN aiqueue_record_month_kept(part.part, p_completed_seconds, p_ended_seconds);
        BEGIN
            EXECUTE format('ALTER TABLE ai_marking_queue_ended DETACH PARTITION %s', part.part);
            EXECUTE format('DELETE FROM ai_marking_traces t USING %s q'
                           ' WHERE t.queue_id = q.queue_id', part.part);
            -- Its rows' ended statuses' deltas: their live ones sum to the live
            -- rows created that month, which are in the live table and stay.
            DELETE FROM ai_marking_counts c
            WHERE c.status NOT IN ('pending', 'processing')
              AND (c.month < part.upper_bound
                   AND (part.lower_bound IS NULL OR c.month >= part.lower_bound)
                   -- The rows from before the upgrade were counted without a month.
                   OR (part.lower_bound IS NULL AND c.month IS NULL));
            EXECUTE format('DROP TABLE %s', part.part);
            n := n + 1;
        EXCEPTION WHEN lock_not_available THEN
            EXIT;  -- busy: the next pass
        END;
    END LOOP;
    RETURN n;
END
$$;

-- Whether every record row created before `p_at` is gone: no month of the
-- ended rows starts before it, and neither their default nor the live table
-- (a queue's few rows) holds one from before it.
CREATE OR REPLACE FUNCTION aiqueue_record_gone_before(p_at timestamptz) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT NOT EXISTS (SELECT 1 FROM aiqueue_partitions() x
                       WHERE x.parent = 'ai_marking_queue_ended'::regclass AND NOT x.is_default
                         AND coalesce(x.lower_bound, '-infinity') < p_at)
       AND NOT EXISTS (SELECT 1 FROM ai_marking_queue_ended_default d WHERE d.created_at < p_at)
       AND NOT EXISTS (SELECT 1 FROM ai_marking_queue_live l WHERE l.created_at < p_at)
$$;
