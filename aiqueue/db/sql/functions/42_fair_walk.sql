-- The fair pick's walk (42_fair_pick.sql): the waiting groups in turn order.

-- The next waiting group in turn order (priority first, then the smallest
-- counter, turns by rows breaking ties) among `p_pools` (NULL: all), other than
-- the groups `p_seen` (pool/priority/group); NULLs: none.  The walk index
-- orders the groups by their walk key, a lower bound of (counter, head_turn,
-- head_seq) that every writer of the row keeps (aiqueue_fair_key, 40_fair.sql): the
-- walk reads in key order, keeps the smallest true order met, and stops at the
-- first group whose key is past it (its own order can only be further), or at
-- a lower priority.  It reads the first group and the few (at most
-- aiqueue_fair_slack when they were charged) whose keys lie below its order.
-- Most walks stop at the second group: one statement reads the first two
-- (a cursor costs twice that); only when the second's key is not past the
-- first's order does the walk go on, row by row (aiqueue_fair_next_walk).
CREATE OR REPLACE FUNCTION aiqueue_fair_next(p_pools text[], p_seen text[], OUT pool text,
                                             OUT priority integer, OUT group_key text,
                                             OUT joins bigint, OUT counter float8)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    c record;
BEGIN
    SELECT two.*,
           lead(two.priority) OVER w AS next_priority, lead(two.walk_key) OVER w AS next_key,
           lead(two.walk_turn) OVER w AS next_turn, lead(two.walk_seq) OVER w AS next_seq
    INTO c
    FROM (SELECT f.pool, f.priority, f.group_key, f.joins, f.counter, f.head_turn, f.head_seq,
                 f.walk_key, f.walk_turn, f.walk_seq FROM ai_marking_fair f
          WHERE f.waiting AND (f.capped_until IS NULL OR f.capped_until <= now())
            AND (f.due_at IS NULL OR f.due_at <= now())
            AND (p_pools IS NULL OR f.pool = ANY (p_pools))
            AND NOT ((f.pool || '/' || f.priority || '/' || f.group_key) = ANY (p_seen))
          ORDER BY f.priority DESC, f.walk_key, f.walk_turn, f.walk_seq LIMIT 2) two
    WINDOW w AS (ORDER BY two.priority DESC, two.walk_key, two.walk_turn, two.walk_seq)
    ORDER BY two.priority DESC, two.walk_key, two.walk_turn, two.walk_seq LIMIT 1;
    IF c.next_priority IS NOT NULL AND c.next_priority = c.priority
       AND (c.next_key, c.next_turn, c.next_seq) <= (c.counter, c.head_turn, c.head_seq) THEN
        c := aiqueue_fair_next_walk(p_pools, p_seen);
    END IF;
    pool := c.pool;
    priority := c.priority;
    group_key := c.group_key;
    joins := c.joins;
    counter := c.counter;
END
$$;

-- The walk of aiqueue_fair_next past its second group, row by row.
-- A declared cursor is planned for its first rows (cursor_tuple_fraction): the
-- walk index in order, where a plain FOR query would sort every waiting group.
CREATE OR REPLACE FUNCTION aiqueue_fair_next_walk(p_pools text[], p_seen text[],
                                                  OUT pool text, OUT priority integer,
                                                  OUT group_key text, OUT joins bigint,
                                                  OUT counter float8)
LANGUAGE plpgsql AS $$
DECLARE
    c record;
    best record;
    have boolean := false;
    walk CURSOR (c_pools text[], c_seen text[]) FOR
        SELECT f.pool, f.priority, f.group_key, f.joins, f.counter, f.head_turn, f.head_seq,
               f.walk_key, f.walk_turn, f.walk_seq FROM ai_marking_fair f
        WHERE f.waiting AND (f.capped_until IS NULL OR f.capped_until <= now())
          AND (f.due_at IS NULL OR f.due_at <= now())
          AND (c_pools IS NULL OR f.pool = ANY (c_pools))
          AND NOT ((f.pool || '/' || f.priority || '/' || f.group_key) = ANY (c_seen))
        ORDER BY f.priority DESC, f.walk_key, f.walk_turn, f.walk_seq;
BEGIN
    FOR c IN walk(p_pools, p_seen) LOOP
        IF NOT have THEN
            best := c;
            have := true;
            CONTINUE;
        END IF;
        EXIT WHEN c.priority < best.priority
                  OR (c.walk_key, c.walk_turn, c.walk_seq)
                     > (best.counter, best.head_turn, best.head_seq);
        IF (c.counter, c.head_turn, c.head_seq) < (best.counter, best.head_turn, best.head_seq)
        THEN
            best := c;
        END IF;
    END LOOP;
    IF have THEN
        pool := best.pool;
        priority := best.priority;
        group_key := best.group_key;
        joins := best.joins;
        counter := best.counter;
    END IF;
END
$$;
