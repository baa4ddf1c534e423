-- What follows a move: the effects of a row's status change, one function each.
--
-- No trigger follows a status change: the function that moves a row calls,
-- after its move, the effects that move can have (docs/architecture.md, "What
-- moves a row"), each set-based over the rows its statement moved, in this
-- order (row locks before the claim lock, which the run's end takes):
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
-- status before, in the same order.  Inserts and deletes of rows (an enqueue,
-- host SQL, a cascade from submissions) are still followed by the statement
-- triggers in 80_feed, 40_fair and 72_groups: host SQL may insert and delete
-- rows itself, and what it does must still be counted.

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
