-- What follows a move: the effects of a row's status change, one function each.
--
-- No trigger follows the queue's own status changes: the function that moves a
-- row calls, after its move, the effects that move can have
-- (docs/architecture.md, "What moves a row"), each set-based over the rows its
-- statement moved, in this order (row locks before the claim lock, which the
-- run's end takes):
--   aiqueue_feed_moved         the change feed and the listeners' wake-up (80_feed)
--   aiqueue_counts_moved       the per-status count deltas (80_feed)
--   aiqueue_calibration_moved  a run's calibration rows all ended (88_calibration)
--   aiqueue_groups_moved       a same-answer leader completed or left (72_groups)
--   aiqueue_outbox_moved       marking.row_failed / row_expired, a run's end (90_outbox)
--   aiqueue_fair_moved         a row back to pending joins its group's turns (40_fair)
-- aiqueue_moved calls them all, for a statement whose rows go to more than one
-- status (a failure: pending or failed).
--
-- Each takes `moved`, the rows as the move left them, and `was`, each one's
-- status before, in the same order.  Each of aiqueue's moves bumps the row's
-- `queue_moves` in the statement that changes its status.  Inserts and deletes of rows
-- (an enqueue, host SQL, a cascade from submissions) are still followed by the
-- statement triggers in 80_feed, 40_fair and 72_groups, and a status set by host
-- SQL by the one trigger below: host SQL and operators write the table too, and
-- what they do must still be counted, seen live and notified.

CREATE OR REPLACE FUNCTION aiqueue_moved(moved ai_marking_queue[], was text[],
                                         live_at timestamptz[] DEFAULT NULL,
                                         p_locked boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(cardinality(moved), 0) = 0 THEN
        RETURN;
    END IF;
    PERFORM aiqueue_feed_moved(moved);
    PERFORM aiqueue_counts_moved(moved, was);
    PERFORM aiqueue_calibration_moved(moved, was);
    PERFORM aiqueue_groups_moved(moved, was, live_at, p_locked);
    PERFORM aiqueue_outbox_moved(moved, was, p_locked);
    PERFORM aiqueue_fair_moved(moved, was);
END
$$;

-- A status changed by host SQL or an operator by hand (an UPDATE that left
-- `queue_moves` alone): followed as aiqueue's own moves are, one row at a time.  A
-- trigger, because such a write calls none of the functions above; its WHEN
-- leaves every move of aiqueue's own (which bumps `queue_moves`) without a call, so
-- none of them pays for it.  Named after 35_ready's ("0..."), which it needs
-- first: the turns read the ready table.
CREATE OR REPLACE FUNCTION aiqueue_host_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- NEW is the partition's row type (aiqueue 0078): the record's row, read again.
    PERFORM aiqueue_moved(ARRAY(SELECT q FROM ai_marking_queue q
                                WHERE q.queue_id = NEW.queue_id AND q.created_at = NEW.created_at),
                          ARRAY[OLD.status], ARRAY[OLD.run_after]);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER ai_marking_queue_host_moved
    AFTER UPDATE OF status ON ai_marking_queue
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status
                       AND NEW.queue_moves = OLD.queue_moves)
    EXECUTE FUNCTION aiqueue_host_moved();

-- A row whose update moves it between the live table and its month (its end, a
-- retry: aiqueue 0078) fires no UPDATE row trigger: PostgreSQL runs that update
-- as a delete and an insert.  This statement trigger, on the record only (the
-- claim and the settle name the live table, or move rows aiqueue follows
-- itself), does for those rows what the row triggers do for the others: one
-- that left pending loses its ready row, one back to pending gets one
-- (35_ready.sql), and a status set by hand is followed.
CREATE OR REPLACE FUNCTION aiqueue_record_crossed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    moved ai_marking_queue[];
    was text[];
    live_at timestamptz[];
BEGIN
    -- Most of them (a result, aiqueue's own ends) need nothing: one look.
    IF NOT EXISTS (SELECT 1 FROM new_rows n JOIN old_rows o ON o.queue_id = n.queue_id
                   WHERE (n.status IN ('pending', 'processing'))
                         <> (o.status IN ('pending', 'processing'))
                     AND (n.status = 'pending' OR o.status = 'pending'
                          OR n.queue_moves = o.queue_moves)) THEN
        RETURN NULL;
    END IF;
    DELETE FROM ai_marking_ready r USING old_rows o, new_rows n
    WHERE o.queue_id = n.queue_id AND r.queue_id = o.queue_id AND o.status = 'pending'
      AND n.status NOT IN ('pending', 'processing');
    INSERT INTO ai_marking_ready (queue_id, pool, priority, grp, kind, turn, seq, run_after,
                                  lane, not_before, expires_at, leader_id, run_kind)
    SELECT n.queue_id, n.pool, n.priority, coalesce(n.group_key, n.assignment_id), n.kind,
           n.turn, n.seq, n.run_after, n.lane, n.not_before, n.expires_at, n.leader_id,
           n.run_kind
    FROM new_rows n JOIN old_rows o ON o.queue_id = n.queue_id
    WHERE n.status = 'pending' AND o.status NOT IN ('pending', 'processing')
    ON CONFLICT (queue_id) DO NOTHING;
    -- A row ended by hand without an end time got one as it entered its month
    -- (98_record_months.sql, aiqueue_ended_untimed).
    SELECT array_agg(n ORDER BY n.queue_id), array_agg(o.status ORDER BY n.queue_id),
           array_agg(o.run_after ORDER BY n.queue_id)
    INTO moved, was, live_at
    FROM new_rows n JOIN old_rows o ON o.queue_id = n.queue_id
    WHERE n.queue_moves = o.queue_moves
      AND (n.status IN ('pending', 'processing')) <> (o.status IN ('pending', 'processing'));
    PERFORM aiqueue_moved(moved, was, live_at);
    RETURN NULL;
END
$$;

-- Named to fire first ("0"), as 35_ready's triggers.
CREATE OR REPLACE TRIGGER ai_marking_queue_0_crossed
    AFTER UPDATE ON ai_marking_queue REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_record_crossed();
