-- aiqueue 0004: per-status row counts kept as deltas, so stats never count the table.
--
-- Counting completed rows at 1,000,000 rows is a full index scan (slower than a
-- plain count(*)).  Instead every statement that inserts, changes the status of,
-- or deletes queue rows appends one delta row per status it touched; stats sum
-- the deltas, and pruning folds them into one row per status once a minute.
-- Appending (never updating a shared counter row) keeps concurrent webhooks from
-- queueing on one row lock.  Deltas commit with the change, so the sums are
-- exactly what count(*) would see in the same snapshot.
CREATE TABLE ai_marking_counts (
    status text NOT NULL,
    n bigint NOT NULL
);

INSERT INTO ai_marking_counts (status, n)
SELECT status, count(*) FROM ai_marking_queue GROUP BY status;

-- Bulk statements (an enqueue, a prune, a cascade from submissions) add one
-- grouped delta per status; a single status change (the hot path) is a
-- row-level trigger, filtered by WHEN, whose plan plpgsql caches.
CREATE FUNCTION aiqueue_count_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ai_marking_counts (status, n)
        SELECT status, count(*) FROM new_rows GROUP BY status;
    ELSE
        INSERT INTO ai_marking_counts (status, n)
        SELECT status, -count(*) FROM old_rows GROUP BY status;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION aiqueue_count_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_counts (status, n) VALUES (OLD.status, -1), (NEW.status, 1);
    RETURN NULL;
END
$$;

CREATE TRIGGER ai_marking_queue_counts_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_count_changes();
CREATE TRIGGER ai_marking_queue_counts_upd
    AFTER UPDATE OF status ON ai_marking_queue
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION aiqueue_count_move();
CREATE TRIGGER ai_marking_queue_counts_del
    AFTER DELETE ON ai_marking_queue REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_count_changes();
