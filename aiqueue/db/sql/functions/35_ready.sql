-- ai_marking_ready: one row per pending row of the record (migration 0067,
-- docs/architecture.md), with the columns the pending walks read and their
-- indexes, so that the record's own updates name no indexed column.
--
-- Why a trigger keeps it, where every other move is a statement in the
-- function that makes it: ai_marking_queue is the table host SQL and operators
-- write (an insert of pending rows, a status set by hand, the tests' own
-- fixtures), and the claim must see exactly the pending rows whoever wrote
-- them.  One insert trigger (statement-level, its transition table: one
-- statement per enqueue however many rows) and one row trigger on the columns
-- mirrored here, filtered by WHEN so that an update that changes none of them
-- (a claim's heartbeat, a result's usage) never calls it.  Deleting a record
-- row deletes its ready row (ON DELETE CASCADE).
--
-- Named to fire first ("0"): PostgreSQL fires a table's triggers for one event
-- in name order, and the turns' and same-answer triggers read this table.

CREATE OR REPLACE FUNCTION aiqueue_ready_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_ready (queue_id, pool, priority, grp, kind, turn, seq, run_after,
                                  lane, not_before, expires_at, leader_id, run_kind)
    SELECT n.queue_id, n.pool, n.priority, coalesce(n.group_key, n.assignment_id), n.kind,
           n.turn, n.seq, n.run_after, n.lane, n.not_before, n.expires_at, n.leader_id,
           n.run_kind
    FROM new_rows n WHERE n.status = 'pending';
    RETURN NULL;
END
$$;

-- A row entering pending gets its ready row, one leaving it loses it, and a
-- pending row's mirrored columns changed change it.
CREATE OR REPLACE FUNCTION aiqueue_ready_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status <> 'pending' THEN
        DELETE FROM ai_marking_ready r WHERE r.queue_id = OLD.queue_id;
    ELSIF OLD.status <> 'pending' THEN
        INSERT INTO ai_marking_ready (queue_id, pool, priority, grp, kind, turn, seq, run_after,
                                      lane, not_before, expires_at, leader_id, run_kind)
        VALUES (NEW.queue_id, NEW.pool, NEW.priority, coalesce(NEW.group_key, NEW.assignment_id),
                NEW.kind, NEW.turn, NEW.seq, NEW.run_after, NEW.lane, NEW.not_before,
                NEW.expires_at, NEW.leader_id, NEW.run_kind)
        ON CONFLICT (queue_id) DO NOTHING;
    ELSE
        UPDATE ai_marking_ready r
        SET pool = NEW.pool, priority = NEW.priority,
            grp = coalesce(NEW.group_key, NEW.assignment_id), kind = NEW.kind, turn = NEW.turn,
            seq = NEW.seq, run_after = NEW.run_after, lane = NEW.lane,
            not_before = NEW.not_before, expires_at = NEW.expires_at, leader_id = NEW.leader_id,
            run_kind = NEW.run_kind
        WHERE r.queue_id = NEW.queue_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER ai_marking_queue_0_ready_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_ready_inserted();

CREATE OR REPLACE TRIGGER ai_marking_queue_0_ready_upd
    AFTER UPDATE OF status, pool, priority, group_key, assignment_id, kind, turn, seq, run_after,
                    lane, not_before, expires_at, leader_id, run_kind ON ai_marking_queue
    FOR EACH ROW WHEN (
        (OLD.status = 'pending') <> (NEW.status = 'pending')
        OR (NEW.status = 'pending'
            AND (OLD.pool, OLD.priority, OLD.group_key, OLD.assignment_id, OLD.kind, OLD.turn,
                 OLD.seq, OLD.run_after, OLD.lane, OLD.not_before, OLD.expires_at,
                 OLD.leader_id, OLD.run_kind)
                IS DISTINCT FROM
                (NEW.pool, NEW.priority, NEW.group_key, NEW.assignment_id, NEW.kind, NEW.turn,
                 NEW.seq, NEW.run_after, NEW.lane, NEW.not_before, NEW.expires_at,
                 NEW.leader_id, NEW.run_kind)))
    EXECUTE FUNCTION aiqueue_ready_moved();

-- A record row deleted (erasure, the prune, retention, a submission deleted by
-- its host) takes its ready, claimed and traces rows with it: the trigger that
-- stands in for their foreign keys, which a record partitioned by month cannot
-- have (aiqueue 0078).  A statement trigger (a row's move to its month, a
-- delete and an insert to PostgreSQL, fires none): the prune deletes thousands at once.
CREATE OR REPLACE FUNCTION aiqueue_record_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM ai_marking_ready r USING old_rows o WHERE r.queue_id = o.queue_id;
    DELETE FROM ai_marking_claimed c USING old_rows o WHERE c.queue_id = o.queue_id;
    DELETE FROM ai_marking_traces t USING old_rows o WHERE t.queue_id = o.queue_id;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER ai_marking_queue_0_gone
    AFTER DELETE ON ai_marking_queue REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_record_gone();

-- TRUNCATE (host SQL, tests) fires no delete trigger: it empties them too, as
-- their keys' CASCADE did.
CREATE OR REPLACE FUNCTION aiqueue_record_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM ai_marking_ready;
    DELETE FROM ai_marking_claimed;
    DELETE FROM ai_marking_traces;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER ai_marking_queue_0_truncated
    AFTER TRUNCATE ON ai_marking_queue
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_record_truncated();
