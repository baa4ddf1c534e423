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

-- A progress item from the current dispatch (the `heartbeat` query): it extends
-- the dispatch's lease, and while the row is processing goes to the live feed
-- as a `processing` event (the feed keeps only the counts: the message may
-- quote the answer, and the feed is kept for a day; live_events_after reads the
-- message from the row while it is processing).  A progress item also says the
-- call has begun answering: its prompt prefix is cached now
-- (aiqueue_cache_answered, 45_cache.sql).  Whether the dispatch's row was found.
--
-- The row is looked for in the live part first: the statement names the record
-- with `status IN ('pending', 'processing')` written out, which prunes its plan
-- to the live table (aiqueue 0078), so a heartbeat locks no month of ended
-- rows.  Only when a late result completed the row meanwhile (the function is
-- still working on it, its lease still held) is the ended row read.
CREATE OR REPLACE FUNCTION aiqueue_heartbeat(p_queue_id uuid, p_dispatch_seq integer,
                                             p_progress jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    leased boolean;
    r record;
BEGIN
    UPDATE ai_marking_claimed SET lease_at = now()
    WHERE queue_id = p_queue_id AND dispatch_seq = p_dispatch_seq;
    leased := FOUND;
    UPDATE ai_marking_queue q SET progress = p_progress, updated_at = now()
    WHERE q.queue_id = p_queue_id AND q.dispatch_seq = p_dispatch_seq
      AND q.status IN ('pending', 'processing') AND q.status = 'processing'
    RETURNING q.queue_id, q.submission_id, q.assignment_id, q.status, q.pool, q.priority,
              coalesce(q.group_key, q.assignment_id) AS grp, q.payload_id
    INTO r;
    IF NOT FOUND THEN
        IF NOT leased THEN
            RETURN false;
        END IF;
        UPDATE ai_marking_queue q SET progress = p_progress, updated_at = now()
        WHERE q.queue_id = p_queue_id AND q.dispatch_seq = p_dispatch_seq
          AND q.status = 'completed'
        RETURNING q.queue_id, q.submission_id, q.assignment_id, q.status, q.pool, q.priority,
                  coalesce(q.group_key, q.assignment_id) AS grp, q.payload_id
        INTO r;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
    ELSE
        INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, summary)
        VALUES (r.assignment_id, r.queue_id, r.submission_id, r.status,
                jsonb_build_object('progress', jsonb_strip_nulls(jsonb_build_object(
                    'current', p_progress -> 'current', 'total', p_progress -> 'total'))));
        PERFORM aiqueue_notify();
    END IF;
    PERFORM aiqueue_cache_answered(r.pool, r.priority, r.grp, r.payload_id);
    RETURN true;
END
$$;
