-- Recovery: when to ask about a stuck row, and an operator's retry.

-- When a dispatched row is due for recovery (docs/guarantees.md) — or, on a platform
-- the queue asks first (digitalocean), for a look at its invocation: its lease
-- (the dispatch or the last heartbeat) plus the heartbeat timeout once the
-- function has sent a heartbeat, else plus QUEUE_STUCK_AFTER_SECONDS; never
-- later than the dispatch plus the platform's bound (its time limit and a
-- grace; NULL: none); never before `look_after`, when the platform said "not
-- finished yet" or another instance is asking it right now.  greatest() and
-- least() skip NULLs, so each missing term simply drops out.
CREATE OR REPLACE FUNCTION aiqueue_recover_at(lease_at timestamptz, started_at timestamptz,
                                              beat boolean, look_after timestamptz,
                                              stuck float8, heartbeat float8, bound float8)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT greatest(look_after, least(
        lease_at + make_interval(secs => CASE WHEN beat THEN heartbeat ELSE stuck END),
        started_at + make_interval(secs => bound)))
$$;

-- Manual retry (one row or all): failed rows start over with fresh attempts
-- and a fresh turn, exactly as an enqueue hands them out (enqueue.sql:
-- enqueue): a group's k-th retried row gets start + k, start being the turn
-- after the group's last one or the turn at the head of its priority's due
-- rows, and a fresh seq: a retried row keeping the turn it had when first
-- enqueued would go ahead of every group that enqueued since.
-- Inside a round groups go in the order they joined (seq): a fresh seq puts
-- the retried row behind the groups already waiting.
-- What follows the moves is set-based (a replay by filter moves 10,000 rows in
-- one call): aiqueue_retry_recorded.
CREATE OR REPLACE FUNCTION aiqueue_retry(p_ids uuid[], p_actor text)
RETURNS TABLE (queue_id uuid) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    moved ai_marking_queue[];
BEGIN
    WITH locked AS MATERIALIZED (
        SELECT q.queue_id, q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS grp,
               q.seq
        FROM ai_marking_queue q
        WHERE q.queue_id = ANY (p_ids) AND q.status = 'failed'
        ORDER BY q.seq
        FOR UPDATE
    ),
    picked AS (
        SELECT l.*, row_number() OVER (PARTITION BY l.pool, l.priority, l.grp ORDER BY l.seq) - 1
                    AS k
        FROM locked l
    ),
    groups AS (
        SELECT p.pool, p.priority, p.grp, count(*) AS n FROM picked p
        GROUP BY p.pool, p.priority, p.grp
    ),
    turns AS (
        INSERT INTO ai_marking_groups AS g (pool, priority, group_key, last_turn)
        SELECT gr.pool, gr.priority, gr.grp, aiqueue_turn_head(gr.pool, gr.priority) + gr.n - 1
        FROM groups gr
        ON CONFLICT (pool, priority, group_key) DO UPDATE
        SET last_turn = greatest(g.last_turn + (SELECT gr.n FROM groups gr
                                                WHERE gr.pool = g.pool
                                                  AND gr.priority = g.priority
                                                  AND gr.grp = g.group_key),
                                 EXCLUDED.last_turn),
            updated_at = now()
        RETURNING g.pool, g.priority, g.group_key, g.last_turn
    ),
    updated AS (
        UPDATE ai_marking_queue q
        SET status = 'pending', attempts = 0, run_after = now(), finished_at = NULL,
            last_error = NULL, refused_since = NULL, updated_at = now(),
            queue_moves = q.queue_moves + 1,
            turn = t.last_turn - gr.n + 1 + p.k, seq = DEFAULT
        FROM picked p
        JOIN groups gr ON gr.pool = p.pool AND gr.priority = p.priority AND gr.grp = p.grp
        JOIN turns t ON t.pool = p.pool AND t.priority = p.priority AND t.group_key = p.grp
        WHERE q.queue_id = p.queue_id
        RETURNING q AS moved_row
    )
    SELECT array_agg(u.moved_row) INTO moved FROM updated u;
    IF moved IS NOT NULL THEN
        PERFORM aiqueue_retry_recorded(moved, p_actor);
        RETURN QUERY SELECT m.queue_id FROM unnest(moved) m;
    END IF;
END
$$;

-- Where a pool's retried groups go in its turns (aiqueue_retry, one call per
-- pool and priority): at the turn of its first due row, else after its last
-- group's, else at 0.  Turns are a pool's: the head of the row's own pool.
CREATE OR REPLACE FUNCTION aiqueue_turn_head(p_pool text, p_priority integer) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT q.turn FROM ai_marking_ready q
         WHERE -q.priority = -p_priority AND q.run_after <= now() AND q.pool = p_pool
         ORDER BY -q.priority, q.turn, q.seq LIMIT 1),
        (SELECT max(g.last_turn) + 1 FROM ai_marking_groups g
         WHERE g.pool = p_pool AND g.priority = p_priority),
        0)
$$;

-- What a retry of rows `moved` leaves behind it: a history line each, then
-- what follows a move from failed to pending (74_moved.sql): one change-feed
-- event per assignment, one count row per kind and pool, each group joining
-- its turns once (lifted to the floor when it was idle, in key order like an
-- enqueue).
CREATE OR REPLACE FUNCTION aiqueue_retry_recorded(moved ai_marking_queue[], p_actor text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    was text[] := array_fill('failed'::text, ARRAY[cardinality(moved)]);
BEGIN
    INSERT INTO ai_marking_attempts (queue_id, kind, outcome, ended_at, actor)
    SELECT m.queue_id, 'action', 'retry', now(), p_actor FROM unnest(moved) m;
    PERFORM aiqueue_feed_moved(moved, true);
    PERFORM aiqueue_counts_moved(moved, was);
    PERFORM aiqueue_fair_moved(moved, was);
END
$$;

-- A row that failed for good, back in the live table as the processing row it
-- was, for a late result to complete (aiqueue_complete).  True when there was one.
CREATE OR REPLACE FUNCTION aiqueue_failed_back(p_queue_id uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ai_marking_queue q SET status = 'processing', queue_moves = q.queue_moves + 1
    WHERE q.queue_id = p_queue_id AND q.status = 'failed';
    RETURN FOUND;
END
$$;

-- Completed rows still holding a slot for a newer dispatch that never reported
-- (a late result completed the row while that dispatch was out: see
-- aiqueue_complete): the slot is free once that dispatch's lease has run out,
-- as a stuck row's would (aiqueue_recover_at; `p_stuck`, `p_heartbeat`,
-- `p_bound` as there).  How many were freed.  Such a row is in its month of ended rows, so
-- the months are read only when a slot past the shortest threshold has no row
-- in the live part: the recovery sweep, every tick, opens none otherwise
-- (aiqueue 0078).  The lease index's range first, as the sweep's own: the
-- record has no index of its completed rows that a claim's update could keep
-- heap-only.
CREATE OR REPLACE FUNCTION aiqueue_slots_released(p_stuck float8, p_heartbeat float8,
                                                  p_bound float8)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
BEGIN
    IF EXISTS (SELECT 1 FROM ai_marking_claimed c
               WHERE c.lease_at <= now() - make_interval(secs => least(p_stuck, p_heartbeat, p_bound))
                 AND NOT EXISTS (SELECT 1 FROM ai_marking_queue_live q
                                 WHERE q.queue_id = c.queue_id)) THEN
        DELETE FROM ai_marking_claimed c
        USING ai_marking_queue q
        WHERE q.queue_id = c.queue_id AND q.status = 'completed'
          AND NOT (q.status IN ('pending', 'processing'))  -- the ended months alone
          AND c.lease_at <= now() - make_interval(secs => least(p_stuck, p_heartbeat, p_bound))
          AND aiqueue_recover_at(c.lease_at, q.started_at, q.progress IS NOT NULL, NULL,
                                 p_stuck, p_heartbeat, p_bound) <= now();
        GET DIAGNOSTICS n = ROW_COUNT;
    END IF;
    RETURN n;
END
$$;

-- When the first lease runs out (the `next_wakeup` query): the earliest
-- aiqueue_recover_at of the dispatches holding a slot (`p_stuck`,
-- `p_heartbeat`, `p_bound` as there); NULL: none.  With `p_ask` (the platform
-- is asked first), a dispatch with an invocation id is looked at once quiet for
-- `p_look` instead of the heartbeat timeout, not before the look the platform
-- asked us to wait for.
--
-- A slot is held by a processing row, in the live part, which the first
-- statement names with its key written out; the ended months are read only
-- when a slot is held for a row that is not there (a row a late result
-- completed while a newer dispatch was out, aiqueue_complete), so the wake-up
-- every tick computes opens none otherwise (aiqueue 0078).  STABLE: both
-- statements read one snapshot, as one statement would.
CREATE OR REPLACE FUNCTION aiqueue_leases_end(p_stuck float8, p_heartbeat float8,
                                              p_bound float8, p_ask boolean, p_look float8)
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
DECLARE
    at timestamptz;
BEGIN
    SELECT min(aiqueue_recover_at(c.lease_at, q.started_at, q.progress IS NOT NULL OR l.asked,
                                  a.look_after, p_stuck,
                                  CASE WHEN l.asked THEN p_look ELSE p_heartbeat END, p_bound))
    INTO at
    FROM ai_marking_claimed c
    JOIN ai_marking_queue q ON q.queue_id = c.queue_id
     AND q.status IN ('pending', 'processing')  -- the live part alone
    LEFT JOIN ai_marking_attempts a ON a.queue_id = q.queue_id
         AND a.dispatch_seq = q.dispatch_seq AND a.kind = 'dispatch',
    LATERAL (SELECT p_ask AND a.dispatch_ref IS NOT NULL AND q.status = 'processing' AS asked) l;
    IF EXISTS (SELECT 1 FROM ai_marking_claimed c
               WHERE NOT EXISTS (SELECT 1 FROM ai_marking_queue_live q
                                 WHERE q.queue_id = c.queue_id)) THEN
        -- An ended row is never asked about (it is not processing).
        SELECT least(at, min(aiqueue_recover_at(c.lease_at, q.started_at, q.progress IS NOT NULL,
                                                a.look_after, p_stuck, p_heartbeat, p_bound)))
        INTO at
        FROM ai_marking_claimed c
        JOIN ai_marking_queue q ON q.queue_id = c.queue_id
         AND NOT (q.status IN ('pending', 'processing'))  -- the ended months alone
        LEFT JOIN ai_marking_attempts a ON a.queue_id = q.queue_id
             AND a.dispatch_seq = q.dispatch_seq AND a.kind = 'dispatch';
    END IF;
    RETURN at;
END
$$;

-- A recovered dispatch's history line ends `stuck` (the `recover_stuck` query,
-- once per row it recovers; `platform_timeout`: the platform timed it out).  An
-- attempt starts after its row was created (`p_created`): only the attempts'
-- months since are looked at (97_partitions.sql), as a constant of this
-- statement's plan, so the sweep's own plan names no month of them.
CREATE OR REPLACE FUNCTION aiqueue_attempt_stuck(p_queue_id uuid, p_dispatch_seq integer,
                                                 p_created timestamptz, p_why text)
RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ai_marking_attempts a SET ended_at = now(), outcome = 'stuck', error = p_why,
        platform = CASE WHEN p_why = 'platform_timeout' THEN 'timed_out' ELSE a.platform END
    WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq AND a.kind = 'dispatch'
      AND a.started_at >= aiqueue_months_from(p_created);
    RETURN 1;
END
$$;
