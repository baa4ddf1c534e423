-- Fair turns by tokens: the group counters, their triggers and the fair pick.
--
-- Turns by tokens: the Virtual Token Counter of Sheng et al., "Fairness in
-- Serving Large Language Models" (OSDI 2024).  Each group has a counter per
-- pool and priority (ai_marking_fair); a dispatch charges it input + 2 × output
-- of the row's estimated tokens, the result's usage corrects the charge, and
-- the claim serves the waiting group with the smallest counter.  A group that
-- starts waiting is first lifted to the smallest counter of the groups already
-- waiting, so idleness banks no credit.  Spend caps pause a group (or a pool)
-- until its UTC hour or day rolls over; they never fail a row.

-- The weight a dispatch is charged: input + 2 × output tokens (VTC's weights).
CREATE OR REPLACE FUNCTION aiqueue_fair_weight(prompt float8, completion float8) RETURNS float8
LANGUAGE sql IMMUTABLE AS $$
    SELECT prompt + 2 * completion
$$;

-- Where a group that starts waiting is lifted to: the smallest counter of the
-- groups already waiting at its pool and priority; with none waiting, the
-- largest counter there (the last groups served), so a long-idle group banks
-- no credit either.  NULL: the first group ever.
-- The smallest: the first waiting group by walk key, then the smallest counter
-- of the groups whose keys are not past its counter (a key is a lower bound of
-- its counter: aiqueue_fair_key).  The largest is a key: a group that is not
-- waiting keeps its key at its counter.
CREATE OR REPLACE FUNCTION aiqueue_fair_floor(p_pool text, p_priority integer) RETURNS float8
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT min(f.counter) FROM ai_marking_fair f
         WHERE f.waiting AND f.pool = p_pool AND f.priority = p_priority
           AND f.walk_key <= (SELECT w.counter FROM ai_marking_fair w
                              WHERE w.waiting AND w.pool = p_pool AND w.priority = p_priority
                              ORDER BY w.priority DESC, w.walk_key, w.walk_turn, w.walk_seq
                              LIMIT 1)),
        (SELECT f.walk_key FROM ai_marking_fair f
         WHERE f.pool = p_pool AND f.priority = p_priority
         ORDER BY f.walk_key DESC LIMIT 1))
$$;

-- The turn order's index (aiqueue 0060) orders the waiting groups by a walk key
-- (walk_key, walk_turn, walk_seq), a lower bound of (counter, head_turn,
-- head_seq): a charge that leaves the key where it is updates the row
-- heap-only (docs/performance.md, "State tables: what a job writes"), and
-- aiqueue_fair_next relies on the bound to find the exact smallest.  Every
-- statement that moves a group's counter, head or `waiting` sets the key with
-- aiqueue_fair_key (a BEFORE trigger would lock the row first: one more WAL
-- record per update).  The key moves to the true order when the row starts or
-- stops waiting or is not waiting (the largest counter is read from the keys),
-- when the true order falls below the key, and when more than
-- aiqueue_fair_slack() other waiting groups of its priority lie between the key
-- and the true order: a walk that meets the group reads those few besides it.
-- A new row's key is its true order.
CREATE OR REPLACE FUNCTION aiqueue_fair_slack() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT 8
$$;

-- The key of group row `f` after an update that leaves it `p_waiting` with
-- counter `p_counter` and head (`p_turn`, `p_seq`).
CREATE OR REPLACE FUNCTION aiqueue_fair_key(f ai_marking_fair, p_waiting boolean,
                                            p_counter float8, p_turn bigint, p_seq bigint,
                                            OUT walk_key float8, OUT walk_turn bigint,
                                            OUT walk_seq bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    crowd integer;
BEGIN
    walk_key := p_counter;
    walk_turn := p_turn;
    walk_seq := p_seq;
    IF NOT (p_waiting AND f.waiting)
       OR (p_counter, p_turn, p_seq) < (f.walk_key, f.walk_turn, f.walk_seq) THEN
        RETURN;
    END IF;
    IF (p_counter, p_turn, p_seq) <> (f.counter, f.head_turn, f.head_seq) THEN
        SELECT count(*) INTO crowd FROM (
            SELECT 1 FROM ai_marking_fair x
            WHERE x.waiting AND x.priority = f.priority
              AND (x.walk_key, x.walk_turn, x.walk_seq) > (f.walk_key, f.walk_turn, f.walk_seq)
              AND (x.walk_key, x.walk_turn, x.walk_seq) <= (p_counter, p_turn, p_seq)
            -- In the walk index's order: a short range of it.  Without it the plan
            -- cache's generic plan read every group row (a seq scan, about 120 us
            -- at 1,000 groups, on every charge that moves the key).
            ORDER BY x.priority DESC, x.walk_key, x.walk_turn, x.walk_seq
            LIMIT aiqueue_fair_slack() + 1) c;
        IF crowd > aiqueue_fair_slack() THEN
            RETURN;
        END IF;
    END IF;
    walk_key := f.walk_key;
    walk_turn := f.walk_turn;
    walk_seq := f.walk_seq;
END
$$;

-- Rows of a group joined it (an enqueue, a row back to pending): the group
-- waits, lifted first when it was not waiting; `joins` tells a claim that
-- looked before that the group is not empty after all.
CREATE OR REPLACE FUNCTION aiqueue_fair_wait(p_pool text, p_priority integer, p_group text,
                                             p_turn bigint, p_seq bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO ai_marking_fair AS f (pool, priority, group_key, counter, waiting, head_turn,
                                      head_seq, joins, walk_key, walk_turn, walk_seq)
    SELECT p_pool, p_priority, p_group, n.counter, true, n.turn, n.seq, 1, n.counter, n.turn,
           n.seq
    -- The group's first pending row now (rows of it may have been cancelled):
    -- the first of its ready rows and the joining row (p_turn, p_seq), which
    -- may have no ready row yet: a move calls this inside its own statement,
    -- before 35_ready's trigger, which fires at the statement's end, adds one.
    FROM (SELECT NULL) x
    LEFT JOIN LATERAL (
        SELECT q.turn, q.seq FROM ai_marking_ready q
        WHERE q.pool = p_pool AND q.priority = p_priority AND q.grp = p_group
        ORDER BY q.turn, q.seq LIMIT 1) h ON true
    CROSS JOIN LATERAL (
        SELECT coalesce(aiqueue_fair_floor(p_pool, p_priority), 0) AS counter,
               CASE WHEN h.turn IS NULL OR (p_turn, p_seq) < (h.turn, h.seq)
                    THEN p_turn ELSE h.turn END AS turn,
               CASE WHEN h.turn IS NULL OR (p_turn, p_seq) < (h.turn, h.seq)
                    THEN p_seq ELSE h.seq END AS seq) n
    ON CONFLICT (pool, priority, group_key) DO UPDATE
    SET counter = CASE WHEN f.waiting THEN f.counter
                       ELSE greatest(f.counter, EXCLUDED.counter) END,
        head_turn = EXCLUDED.head_turn, head_seq = EXCLUDED.head_seq,
        (walk_key, walk_turn, walk_seq) = (
            SELECT k.* FROM aiqueue_fair_key(
                f, true, CASE WHEN f.waiting THEN f.counter
                              ELSE greatest(f.counter, EXCLUDED.counter) END,
                EXCLUDED.head_turn, EXCLUDED.head_seq) k),
        waiting = true, joins = f.joins + 1, due_at = NULL, updated_at = now()
$$;

CREATE OR REPLACE FUNCTION aiqueue_fair_join_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- In key order, so that two enqueues lock the groups' rows in one order.
    PERFORM aiqueue_fair_wait(n.pool, n.priority, n.grp, n.turn, n.seq)
    FROM (SELECT DISTINCT ON (1, 2, 3) r.pool, r.priority,
                 coalesce(r.group_key, r.assignment_id) AS grp, r.turn, r.seq
          FROM new_rows r WHERE r.status = 'pending' ORDER BY 1, 2, 3, r.turn, r.seq) n;
    RETURN NULL;
END
$$;

-- Rows inserted by any statement join their groups: a trigger, because host SQL
-- may insert pending rows itself (tests do), and they must wait in turns too.
CREATE OR REPLACE TRIGGER ai_marking_queue_fair_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_fair_join_rows();

-- The groups of rows `p_ids` that are pending now join their turns, once each,
-- in key order, at their first pending row.
CREATE OR REPLACE FUNCTION aiqueue_fair_join_ids(p_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM aiqueue_fair_wait(n.pool, n.priority, n.grp, n.turn, n.seq)
    FROM (SELECT DISTINCT ON (1, 2, 3) q.pool, q.priority,
                 coalesce(q.group_key, q.assignment_id) AS grp, q.turn, q.seq
          FROM ai_marking_queue q
          WHERE q.queue_id = ANY (p_ids) AND q.status = 'pending'
          ORDER BY 1, 2, 3, q.turn, q.seq) n;
END
$$;

-- Rows that moved back to pending, one statement's (74_moved.sql: a failure
-- with attempts left, a refusal, recovery, a retry, a batch's rows handed
-- back): their groups join their turns, once each.
CREATE OR REPLACE FUNCTION aiqueue_fair_moved(moved ai_marking_queue[], was text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM aiqueue_fair_wait(n.pool, n.priority, n.grp, n.turn, n.seq)
    FROM (SELECT DISTINCT ON (1, 2, 3) m.pool, m.priority,
                 coalesce(m.group_key, m.assignment_id) AS grp, m.turn, m.seq
          FROM unnest(moved) WITH ORDINALITY AS m
          WHERE m.status = 'pending' AND was[m.ordinality] IS DISTINCT FROM 'pending'
          ORDER BY 1, 2, 3, m.turn, m.seq) n;
END
$$;

-- A pending row made due sooner without a status change (the batch lane
-- handing rows back, a reschedule): its group's due_at may be too late now,
-- so it is forgotten, and `joins` tells a claim computing it meanwhile.
CREATE OR REPLACE FUNCTION aiqueue_fair_sooner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ai_marking_fair f SET due_at = NULL, joins = f.joins + 1
    WHERE f.pool = NEW.pool AND f.priority = NEW.priority
      AND f.group_key = coalesce(NEW.group_key, NEW.assignment_id) AND f.due_at IS NOT NULL;
    RETURN NULL;
END
$$;

-- A trigger, not a call in the statements that do it (the calibration release,
-- a same-answer heir): host SQL may set a row's run_after sooner too (tests
-- do), and the fair walk must not keep stepping over its group until due_at.
-- Its WHEN leaves every status change (the hot path) without a call.
CREATE OR REPLACE TRIGGER ai_marking_queue_fair_sooner
    AFTER UPDATE OF run_after ON ai_marking_queue
    FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status = 'pending'
                       AND NEW.run_after < OLD.run_after)
    EXECUTE FUNCTION aiqueue_fair_sooner();

-- Is a row of `kinds` due now, other than `except_id`, in a group that is
-- neither paused at a spend cap nor known to wait for later?  The claim's
-- `more` and can_claim (aiqueue 0023): the waiting groups, one probe each per
-- kind, instead of a walk of the claim index past every row not due yet, of
-- a kind without room, or of a paused group.
CREATE OR REPLACE FUNCTION aiqueue_due_exists(kinds text[], plan jsonb, except_id uuid)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    pools text[] := aiqueue_kinds_pools(kinds, plan);
BEGIN
    -- LATERAL ... LIMIT 1: a probe per group and kind, never a semi-join
    -- that would read every pending row first.
    RETURN (SELECT EXISTS (
        SELECT 1 FROM ai_marking_fair f CROSS JOIN unnest(kinds) k (kind)
        CROSS JOIN LATERAL (
            SELECT 1 FROM ai_marking_ready q
            WHERE q.pool = f.pool AND q.priority = f.priority AND q.grp = f.group_key
              AND q.kind = k.kind AND q.run_after <= now() AND aiqueue_unexpired(q.expires_at)
              AND q.queue_id IS DISTINCT FROM except_id
            -- Ordered as ai_marking_ready_group_kind_idx is: a probe of it, never a
            -- scan that statistics taken while most rows matched would prefer.
            ORDER BY q.turn, q.seq
            LIMIT 1) due
        WHERE f.waiting AND (f.capped_until IS NULL OR f.capped_until <= now())
          AND (f.due_at IS NULL OR f.due_at <= now())
          AND f.pool = ANY (pools)));
END
$$;

-- Cancelled rows that held a group's last turns: the group continues where its
-- live rows end, not behind turns nobody will take (see enqueue).  One entry
-- per cancelled row, the arrays in step: its pool, priority, group and turn.
CREATE OR REPLACE FUNCTION aiqueue_turns_cancelled(p_pool text[], p_priority integer[],
                                                   p_group text[], p_turn bigint[])
RETURNS void LANGUAGE sql AS $$
    UPDATE ai_marking_groups g SET last_turn = c.first_turn - 1, updated_at = now()
    FROM (SELECT pool, priority, group_key, min(turn) AS first_turn, max(turn) AS last_turn
          FROM unnest(p_pool, p_priority, p_group, p_turn) AS r (pool, priority, group_key, turn)
          GROUP BY pool, priority, group_key) c
    WHERE g.pool = c.pool AND g.priority = c.priority AND g.group_key = c.group_key
      AND c.last_turn >= g.last_turn
$$;
