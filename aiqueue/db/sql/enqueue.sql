-- The enqueue's transaction (aiqueue/db/enqueue.py): its rows, the idempotency
-- key's claim, answer and save, and the dry run that writes nothing.
-- Values only ever travel as $n parameters (as in every sql/*.sql file).

-- enqueue --
-- One round trip for the whole batch, atomic: when any id is unknown nothing is
-- inserted and the unknown ids come back instead.  Submissions with an AI mark
-- are left out unless $6 (remark) and come back as 'marked', and so are those
-- that already have a live row.  A concurrent enqueue (or retry) that gives one
-- of them a live row after this statement's snapshot makes the insert fail on
-- the partial unique index: Store.enqueue runs the statement again, and the
-- second run skips it.  (ON CONFLICT DO NOTHING would skip it in place, but its
-- speculative insertion costs 16 ms of 10,000 rows for a race that is rare.)
-- Rows are inserted in submission-id order so that two overlapping batches
-- take their index locks in the same order; seq, numbered in request order
-- first, keeps the queue in the order the teacher's list had.  A batch joins
-- the assignment's live run.
--
-- Turns (migration 0007): the group's k-th new row gets turn start + k, where
-- start is the turn after the group's last one, or the turn at the head of
-- this priority's due rows when the group has emptied (it rejoins at the back
-- of the round being served); with no due row at all, the turn after every
-- group's last, so turns never run backwards.  The upsert of the group's row
-- computes start under that row's lock: concurrent enqueues of one group get
-- consecutive turns.
--
-- The payload ($4, JSON text) is stored once per distinct content (migration
-- 0014), not in every row: the upsert finds the row of an equal payload or
-- adds one, and widens its window of use to this transaction's now(), which
-- is also the new rows' created_at (prune relies on it; the row lock it takes
-- makes a concurrent prune re-check and keep the payload).  '{}' and a batch
-- that inserts nothing store none.
--
-- Pools (migration 0019): the rows carry their kind ($7) and its pool ($8),
-- and turns are the pool's: the head and the group's last turn are its own.
-- $9 not_before and $10 expires_at (aiqueue 0018, CONTRACT §9d; NULL: none).
WITH ids AS MATERIALIZED (
    SELECT DISTINCT ON (id) id, ord
    FROM unnest($1::uuid[]) WITH ORDINALITY AS t (id, ord)
    ORDER BY id, ord
),
subs AS MATERIALIZED (
    SELECT ids.id, ids.ord, s.id IS NOT NULL AS known, s.ai_marked_at IS NOT NULL AS marked
    FROM ids LEFT JOIN submissions s ON s.id = ids.id
),
todo AS MATERIALIZED (
    SELECT o.id, o.k, nextval('ai_marking_queue_seq_seq'::regclass) AS seq
    FROM (SELECT x.id, row_number() OVER (ORDER BY x.ord) - 1 AS k
          FROM subs x
          WHERE (NOT x.marked OR $6::boolean)
            AND NOT EXISTS (SELECT 1 FROM ai_marking_queue q
                            WHERE q.submission_id = x.id AND q.status IN ('pending', 'processing'))
            AND NOT EXISTS (SELECT 1 FROM subs u WHERE NOT u.known)
          ORDER BY x.ord) o
),
total AS (
    SELECT count(*) AS n FROM todo
),
head AS (
    SELECT coalesce(
        (SELECT q.turn FROM ai_marking_queue q
         WHERE q.status = 'pending' AND q.priority = $3 AND q.run_after <= now()
           AND q.pool = $8::text
         ORDER BY q.priority DESC, q.turn, q.seq LIMIT 1),
        (SELECT max(g.last_turn) + 1 FROM ai_marking_groups g
         WHERE g.pool = $8::text AND g.priority = $3),
        0) AS turn
),
grp AS (
    INSERT INTO ai_marking_groups AS g (pool, priority, group_key, last_turn)
    SELECT $8::text, $3, $5, head.turn + total.n - 1 FROM head, total WHERE total.n > 0
    ON CONFLICT (pool, priority, group_key) DO UPDATE
    SET last_turn = greatest(g.last_turn + (SELECT n FROM total), EXCLUDED.last_turn),
        updated_at = now()
    RETURNING last_turn
),
run AS (
    SELECT coalesce(
        (SELECT run_id FROM ai_marking_queue
         WHERE assignment_id = $2 AND status IN ('pending', 'processing') LIMIT 1),
        gen_random_uuid()) AS run_id
),
payload AS (
    INSERT INTO ai_marking_payloads AS p (sha256, payload)
    SELECT sha256(convert_to(x.doc::text, 'UTF8')), x.doc
    FROM (SELECT $4::jsonb AS doc) x, total
    WHERE x.doc <> '{}'::jsonb AND total.n > 0
    ON CONFLICT (sha256) DO UPDATE
    SET first_used_at = least(p.first_used_at, now()),
        last_used_at = greatest(p.last_used_at, now())
    RETURNING p.id
),
inserted AS (
    INSERT INTO ai_marking_queue (seq, submission_id, assignment_id, group_key, turn, run_id,
                                  priority, payload_id, kind, pool, not_before, run_after,
                                  expires_at)
    OVERRIDING SYSTEM VALUE
    SELECT t.seq, t.id, $2, nullif($5, $2), grp.last_turn - total.n + 1 + t.k, run.run_id, $3,
           (SELECT id FROM payload), $7::text, $8::text,
           -- Not before $9 (§9d): not due until then, like a retry's backoff.
           $9::timestamptz, coalesce($9::timestamptz, now()), $10::timestamptz
    FROM todo t CROSS JOIN grp CROSS JOIN total CROSS JOIN run
    ORDER BY t.id
    RETURNING queue_id, seq
)
SELECT 'unknown' AS kind, id AS value, 0::bigint AS seq FROM subs WHERE NOT known
UNION ALL
SELECT 'marked', id, 0 FROM subs WHERE known AND marked AND NOT $6::boolean
UNION ALL
SELECT 'queued', queue_id, seq FROM inserted
ORDER BY seq;

-- idempotency_claim --
-- Takes an Idempotency-Key for this transaction (or one expired after 24 h).
-- A concurrent request with the same key waits here on the unique index until
-- the first commits (then it finds the answer) or rolls back (then it takes it).
INSERT INTO ai_marking_idempotency AS i (key, body_hash) VALUES ($1, $2)
ON CONFLICT (key) DO UPDATE
SET body_hash = EXCLUDED.body_hash, answer = NULL, created_at = now()
WHERE i.created_at < now() - interval '24 hours'
RETURNING true AS fresh;

-- idempotency_answer --
SELECT body_hash, answer FROM ai_marking_idempotency WHERE key = $1;

-- idempotency_save --
UPDATE ai_marking_idempotency SET answer = $2 WHERE key = $1;

-- dry_run --
-- What an enqueue of these ids would do, writing nothing (CONTRACT §9c): how
-- many rows it would add (known, without a live row, not marked unless $3
-- remark) and how many are marked already; the unknown ids; what a row of the
-- assignment is expected to use (aiqueue_estimate) and cost in its pool ($5,
-- $6: the money plan); the group's and pool's spend in the windows that hold
-- now; and what runs ahead of it (the pending and processing rows of every pool).
WITH ids AS MATERIALIZED (
    SELECT DISTINCT t.id FROM unnest($1::uuid[]) AS t (id)
),
subs AS MATERIALIZED (
    SELECT ids.id, s.id IS NOT NULL AS known, s.ai_marked_at IS NOT NULL AS marked,
           EXISTS (SELECT 1 FROM ai_marking_queue q
                   WHERE q.submission_id = ids.id AND q.status IN ('pending', 'processing'))
               AS live
    FROM ids LEFT JOIN submissions s ON s.id = ids.id
),
est AS (
    SELECT * FROM aiqueue_estimate($5::text, $2::text)
)
SELECT (SELECT count(*) FROM subs WHERE known AND NOT live AND (NOT marked OR $3::boolean))
           AS rows,
       (SELECT count(*) FROM subs WHERE known AND marked AND NOT $3::boolean) AS already_marked,
       (SELECT coalesce(array_agg(id), '{}') FROM subs WHERE NOT known) AS unknown_ids,
       est.prompt_tokens, est.completion_tokens, est.source,
       coalesce(est.cost_usd, aiqueue_price_usd($6::jsonb, $5::text, est.model,
                                                est.prompt_tokens, est.completion_tokens))
           AS row_cost_usd,
       aiqueue_batch_price_usd($6::jsonb, $5::text, est.model, est.prompt_tokens,
                               est.completion_tokens, est.cost_usd) AS batch_row_cost_usd,
       sp.group_hour, sp.group_day, sp.pool_day,
       (SELECT coalesce(sum(c.n), 0) FROM ai_marking_counts c
        WHERE c.status IN ('pending', 'processing'))::bigint AS ahead
FROM est, aiqueue_spend_now($6::jsonb -> $5::text, $5::text, $4::text) sp;
