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

-- A status change is one row on the hot path: its event (live UIs), its count
-- deltas (stats) and the wake-up of listeners, in one trigger call.
CREATE OR REPLACE FUNCTION aiqueue_record_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, summary)
    VALUES (NEW.assignment_id, NEW.queue_id, NEW.submission_id, NEW.status,
            CASE WHEN NEW.status = 'completed' THEN (
                SELECT jsonb_strip_nulls(jsonb_build_object(
                    'score', s.ai_result -> 'score', 'max_score', s.ai_result -> 'max_score'))
                FROM submissions s WHERE s.id = NEW.submission_id) END);
    INSERT INTO ai_marking_counts (status, kind, pool, n)
    VALUES (OLD.status, OLD.kind, OLD.pool, -1), (NEW.status, NEW.kind, NEW.pool, 1);
    PERFORM aiqueue_notify();
    RETURN NULL;
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
-- grouped delta per status; a single status change (the hot path) is a
-- row-level trigger, filtered by WHEN, whose plan plpgsql caches.
CREATE OR REPLACE FUNCTION aiqueue_count_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ai_marking_counts (status, kind, pool, n)
        SELECT status, kind, pool, count(*) FROM new_rows GROUP BY status, kind, pool;
    ELSE
        INSERT INTO ai_marking_counts (status, kind, pool, n)
        SELECT status, kind, pool, -count(*) FROM old_rows GROUP BY status, kind, pool;
    END IF;
    RETURN NULL;
END
$$;

-- The change feed and the per-status count deltas, bound to the queue table.
-- An enqueue inserts thousands of rows at once: statement-level triggers with
-- transition tables.  A status change is one row on the hot path: a row-level
-- trigger, filtered by WHEN before any function call.
CREATE OR REPLACE TRIGGER ai_marking_queue_events_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_record_inserts();

-- A statement that moves many rows at once and records them itself (a replay
-- of 10,000 failed rows: aiqueue_retry) sets aiqueue.bulk_move for its own
-- duration; the row trigger then stays out (it was 40 % of such a replay).
CREATE OR REPLACE TRIGGER ai_marking_queue_events_upd
    AFTER UPDATE OF status ON ai_marking_queue
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       AND current_setting('aiqueue.bulk_move', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION aiqueue_record_move();

CREATE OR REPLACE TRIGGER ai_marking_queue_counts_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_count_changes();

CREATE OR REPLACE TRIGGER ai_marking_queue_counts_del
    AFTER DELETE ON ai_marking_queue REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_count_changes();
