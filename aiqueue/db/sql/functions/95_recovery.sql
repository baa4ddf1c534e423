-- Recovery: when to ask about a stuck row, and an operator's retry.

-- When a dispatched row is due for recovery (CONTRACT §8e) — or, on a platform
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
-- rows, and a fresh seq.  Without them a retried row kept the turn it had
-- when first enqueued and went ahead of every group that enqueued since
-- (issue 23).
-- It records the moves itself, set-based (a replay by filter moves 10,000 rows
-- in one call, CONTRACT §9e): one change-feed row per assignment (the batch
-- form an enqueue writes, migration 0009), one count delta per status, one
-- wake-up, while aiqueue.bulk_move keeps the row trigger out.
CREATE OR REPLACE FUNCTION aiqueue_retry(p_ids uuid[], p_actor text)
RETURNS TABLE (queue_id uuid) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    moved bigint;
BEGIN
    PERFORM set_config('aiqueue.bulk_move', 'on', true);
    RETURN QUERY
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
    -- Turns are a pool's (aiqueue 0019): the head of the row's own pool.
    head AS (
        SELECT pr.pool, pr.priority, coalesce(
            (SELECT q.turn FROM ai_marking_queue q
             WHERE q.status = 'pending' AND q.priority = pr.priority AND q.run_after <= now()
               AND q.pool = pr.pool
             ORDER BY q.priority DESC, q.turn, q.seq LIMIT 1),
            (SELECT max(g.last_turn) + 1 FROM ai_marking_groups g
             WHERE g.pool = pr.pool AND g.priority = pr.priority),
            0) AS turn
        FROM (SELECT DISTINCT gr.pool, gr.priority FROM groups gr) pr
    ),
    turns AS (
        INSERT INTO ai_marking_groups AS g (pool, priority, group_key, last_turn)
        SELECT gr.pool, gr.priority, gr.grp, h.turn + gr.n - 1
        FROM groups gr JOIN head h ON h.pool = gr.pool AND h.priority = gr.priority
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
            turn = t.last_turn - gr.n + 1 + p.k,
            -- Inside a round groups go in the order they joined (seq): a fresh
            -- seq puts the retried row behind the groups already waiting.
            seq = DEFAULT
        FROM picked p
        JOIN groups gr ON gr.pool = p.pool AND gr.priority = p.priority AND gr.grp = p.grp
        JOIN turns t ON t.pool = p.pool AND t.priority = p.priority AND t.group_key = p.grp
        WHERE q.queue_id = p.queue_id
        RETURNING q.queue_id, q.assignment_id, q.submission_id
    ),
    history AS (
        INSERT INTO ai_marking_attempts (queue_id, kind, outcome, ended_at, actor)
        SELECT u.queue_id, 'action', 'retry', now(), p_actor FROM updated u
    ),
    feed AS (
        INSERT INTO ai_marking_events (assignment_id, status, queue_ids, submission_ids)
        SELECT u.assignment_id, 'pending', array_agg(u.queue_id), array_agg(u.submission_id)
        FROM updated u GROUP BY u.assignment_id
    ),
    counts AS (
        INSERT INTO ai_marking_counts (status, n)
        SELECT x.status, x.n FROM (SELECT count(*) AS n FROM updated) c,
             LATERAL (VALUES ('failed', -c.n), ('pending', c.n)) AS x (status, n)
        WHERE c.n > 0
    )
    SELECT u.queue_id FROM updated u;
    GET DIAGNOSTICS moved = ROW_COUNT;
    PERFORM set_config('aiqueue.bulk_move', 'off', true);
    -- Each group the rows joined waits (lifted to the floor when it was idle),
    -- once per group, in key order like an enqueue (the row trigger stayed out).
    IF moved > 0 THEN
        PERFORM aiqueue_fair_wait(n.pool, n.priority, n.grp, n.turn, n.seq)
        FROM (SELECT DISTINCT ON (1, 2, 3) q.pool, q.priority,
                     coalesce(q.group_key, q.assignment_id) AS grp, q.turn, q.seq
              FROM ai_marking_queue q
              WHERE q.queue_id = ANY (p_ids) AND q.status = 'pending'
              ORDER BY 1, 2, 3, q.turn, q.seq) n;
    END IF;
    IF moved > 0 THEN
        PERFORM aiqueue_notify();
    END IF;
END
$$;
