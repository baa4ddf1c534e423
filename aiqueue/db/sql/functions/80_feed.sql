-- The change feed: events, counts and the wake-up of listeners.

-- Wake live-event listeners, if any instance has one.  NOTIFY folds identical
-- notifications of one transaction into one.
CREATE OR REPLACE FUNCTION aiqueue_notify() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ai_queue_control c WHERE c.id = 1 AND c.listened_until > now()) THEN
        PERFORM pg_notify('ai_marking', '');
    END IF;
END
$$;

-- Rows that moved, one statement's (74_moved.sql): a live event each (a
-- result's with its score), or, `grouped`, one event per assignment and status
-- that the feed's view spreads out (as an enqueue's; a replay of 10,000 rows);
-- then the wake-up.
CREATE OR REPLACE FUNCTION aiqueue_feed_moved(moved ai_marking_queue[],
                                              grouped boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(cardinality(moved), 0) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, summary)
    SELECT m.assignment_id, m.queue_id, m.submission_id, m.status,
           CASE WHEN m.status = 'completed' THEN (
               SELECT jsonb_strip_nulls(jsonb_build_object(
                   'score', s.ai_result -> 'score', 'max_score', s.ai_result -> 'max_score'))
               FROM submissions s WHERE s.id = m.submission_id) END
    FROM unnest(moved) m
    WHERE m.status = 'completed' OR NOT grouped;
    IF grouped THEN
        INSERT INTO ai_marking_events (assignment_id, status, queue_ids, submission_ids)
        SELECT m.assignment_id, m.status, array_agg(m.queue_id), array_agg(m.submission_id)
        FROM unnest(moved) m WHERE m.status <> 'completed'
        GROUP BY m.assignment_id, m.status;
    END IF;
    PERFORM aiqueue_notify();
END
$$;

-- The count deltas of rows that moved, one statement's: one per status, kind,
-- pool and month the rows left or entered (a move is -1 and +1: the stats sum
-- them; the month is the rows' partition's, which a month's drop removes:
-- 98_record_months.sql).
CREATE OR REPLACE FUNCTION aiqueue_counts_moved(moved ai_marking_queue[], was text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_counts (status, kind, pool, month, n)
    SELECT d.status, d.kind, d.pool, aiqueue_count_month(m.created_at), sum(d.n)
    FROM unnest(moved) WITH ORDINALITY AS m
    CROSS JOIN LATERAL (VALUES (was[m.ordinality], m.kind, m.pool, -1),
                               (m.status, m.kind, m.pool, 1)) AS d (status, kind, pool, n)
    WHERE was[m.ordinality] IS DISTINCT FROM m.status
    GROUP BY d.status, d.kind, d.pool, aiqueue_count_month(m.created_at);
END
$$;

-- An enqueue's rows: one batch row per assignment and status (migration 0009).
-- Both arrays aggregate the same stream of rows, so they stay aligned; their
-- order is the group's, not the enqueue's (sorting them by seq cost 11 ms of
-- 10,000 rows, and the rows' events share one transaction anyway).
CREATE OR REPLACE FUNCTION aiqueue_record_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_events (assignment_id, status, queue_ids, submission_ids)
    SELECT assignment_id, status, array_agg(queue_id), array_agg(submission_id)
    FROM new_rows GROUP BY assignment_id, status;
    PERFORM aiqueue_notify();
    RETURN NULL;
END
$$;

-- Bulk statements (an enqueue, a prune, a cascade from submissions) add one
-- grouped delta per status, kind and pool.
CREATE OR REPLACE FUNCTION aiqueue_count_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ai_marking_counts (status, kind, pool, month, n)
        SELECT status, kind, pool, aiqueue_count_month(created_at), count(*) FROM new_rows
        GROUP BY status, kind, pool, aiqueue_count_month(created_at);
    ELSE
        INSERT INTO ai_marking_counts (status, kind, pool, month, n)
        SELECT status, kind, pool, aiqueue_count_month(created_at), -count(*) FROM old_rows
        GROUP BY status, kind, pool, aiqueue_count_month(created_at);
    END IF;
    RETURN NULL;
END
$$;

-- The change feed and the per-status count deltas of rows inserted or deleted.
-- Triggers, because host SQL may insert rows (tests do) and delete them (a
-- submission deleted cascades to its rows), and what it does must still be
-- counted and seen; a status change has no trigger (74_moved.sql).  An enqueue
-- inserts thousands of rows at once: statement-level triggers with transition
-- tables.
CREATE OR REPLACE TRIGGER ai_marking_queue_events_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_record_inserts();

CREATE OR REPLACE TRIGGER ai_marking_queue_counts_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_count_changes();

CREATE OR REPLACE TRIGGER ai_marking_queue_counts_del
    AFTER DELETE ON ai_marking_queue REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_count_changes();
