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
    PERFORM aiqueue_moved(ARRAY[NEW], ARRAY[OLD.status], ARRAY[OLD.run_after]);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER ai_marking_queue_host_moved
    AFTER UPDATE OF status ON ai_marking_queue
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status
                       AND NEW.queue_moves = OLD.queue_moves)
    EXECUTE FUNCTION aiqueue_host_moved();
