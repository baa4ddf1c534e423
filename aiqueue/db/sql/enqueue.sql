-- The enqueue's transaction (aiqueue/db/enqueue.py): its rows, the idempotency
-- key's claim, answer and save, and the dry run that writes nothing.
-- Values only ever travel as $n parameters (as in every sql/*.sql file).

-- enqueue --
-- One round trip for the whole batch, atomic: when any id is unknown nothing is
-- inserted and the unknown ids come back instead.  Submissions with an AI mark
-- are left out unless $6 (remark) and come back as 'marked', and so are those
-- that already have a live row (with $6, a live row of the same payload: a
-- re-mark's row waits beside one of an older payload).  A concurrent enqueue
-- (or retry) that gives one of them a live row after this statement's snapshot
-- makes the insert fail on the partial unique index: Store.enqueue runs the
-- statement again, and the
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
-- $9 not_before and $10 expires_at (aiqueue 0018, docs/operating/alerts.md; NULL: none).
--
-- The same answer (docs/same-answer.md; 72_groups.sql): each answer is read
-- here and keyed by its HMAC under $11/$12 (the derived key's pads; NULL:
-- "mark_each", no key; $13 loose normalisation); only the key is stored.  The
-- live row of the same pool, kind, payload, group, lane ($14) and key that can
-- run now, else the first new row of that key, leads; the others follow it:
-- run_after 'infinity', never claimed.  `copies` says which.
-- The run comes back as a row of its own ('run', docs/agreement.md).
-- Every read of live rows names the record with `status IN ('pending',
-- 'processing')` written out beside `phase = 'live'` (the same rows), which
-- prunes its plan to the live part: an enqueue locks no month of ended rows
-- (aiqueue 0078), here and in dry_run.
WITH ids AS MATERIALIZED (
    SELECT DISTINCT ON (id) id, ord
    FROM unnest($1::uuid[]) WITH ORDINALITY AS t (id, ord)
    ORDER BY id, ord
),
subs AS MATERIALIZED (
    SELECT ids.id, ids.ord, s.id IS NOT NULL AS known, s.ai_marked_at IS NOT NULL AS marked,
           aiqueue_answer_key(s.content, $11::bytea, $12::bytea, $13::boolean) AS answer_key
    FROM ids LEFT JOIN submissions s ON s.id = ids.id
),
todo AS MATERIALIZED (
    SELECT o.id, o.k, nextval('ai_marking_queue_seq_seq'::regclass) AS seq, o.answer_key
    FROM (SELECT x.id, row_number() OVER (ORDER BY x.ord) - 1 AS k, x.answer_key
          FROM subs x
          WHERE (NOT x.marked OR $6::boolean)
            AND NOT EXISTS (SELECT 1 FROM ai_marking_queue q
                            WHERE q.submission_id = x.id AND q.phase = 'live'
                              AND q.status IN ('pending', 'processing')
                              -- a re-mark adds its row beside a live row of another
                              -- payload (the id looked up once: an InitPlan)
                              AND (NOT $6::boolean OR q.payload_id IS NOT DISTINCT FROM
                                   (SELECT aiqueue_payload_id($4::jsonb))))
            AND NOT EXISTS (SELECT 1 FROM subs u WHERE NOT u.known)
          ORDER BY x.ord) o
),
total AS (
    SELECT count(*) AS n FROM todo
),
head AS (
    SELECT coalesce(
        (SELECT q.turn FROM ai_marking_ready q
         WHERE -q.priority = -$3::integer AND q.run_after <= now() AND q.pool = $8::text
         ORDER BY -q.priority, q.turn, q.seq LIMIT 1),
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
         WHERE assignment_id = $2 AND phase = 'live' AND status IN ('pending', 'processing')
         LIMIT 1),
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
-- Each of this enqueue's keys, probed once in its group (one index probe each,
-- keyed by the answer, then the group): the first live row of the same pool,
-- kind, payload, group and lane that can run now leads it (never a row held by
-- a not_before ahead or its run's calibration: the follower would wait for
-- another teacher's moment or release).  A key without one: its first new row.
-- Only the leaders joined are share-locked, so a result for any other row never
-- waits for this enqueue.  A joined leader's end (its result, failure, cancel
-- or erasure) updates its row, so it either waits for this enqueue to commit
-- and then sees the new followers, or ends first and the probe, re-reading the
-- row, steps over it.  Without the lock a follower could join a leader whose
-- end had already handed its group out, and wait for ever.
keys AS MATERIALIZED (
    SELECT DISTINCT t.answer_key FROM todo t WHERE t.answer_key IS NOT NULL
),
live AS MATERIALIZED (
    SELECT k.answer_key, l.queue_id
    FROM keys k CROSS JOIN LATERAL (
        SELECT q.queue_id
        FROM ai_marking_queue q
        WHERE q.answer_key = k.answer_key AND coalesce(q.group_key, q.assignment_id) = $5
          AND q.leader_id IS NULL AND q.phase = 'live' AND q.status IN ('pending', 'processing')
          AND coalesce(q.payload_id, 0) = coalesce((SELECT id FROM payload), 0)
          AND q.pool = $8::text AND q.kind = $7::text AND q.lane = $14::text
          AND q.held_run_after IS NULL AND (q.not_before IS NULL OR q.not_before <= now())
        ORDER BY q.seq
        LIMIT 1
        FOR SHARE OF q
    ) l
),
leaders AS MATERIALIZED (
    SELECT t.answer_key, min(t.seq) AS first_seq, l.queue_id IS NULL AS new_leader,
           coalesce(l.queue_id, gen_random_uuid()) AS leader_id
    FROM todo t LEFT JOIN live l ON l.answer_key = t.answer_key
    WHERE t.answer_key IS NOT NULL
    GROUP BY t.answer_key, l.queue_id
),
lead AS (
    SELECT t.*, CASE WHEN l.new_leader AND l.first_seq = t.seq THEN l.leader_id
                     ELSE gen_random_uuid() END AS queue_id,
           CASE WHEN NOT (l.new_leader AND l.first_seq = t.seq) THEN l.leader_id END
               AS leader_id
    FROM todo t LEFT JOIN leaders l ON l.answer_key = t.answer_key
),
inserted AS (
    INSERT INTO ai_marking_queue (queue_id, seq, submission_id, assignment_id, group_key, turn,
                                  run_id, priority, payload_id, kind, pool, not_before,
                                  run_after, expires_at, answer_key, leader_id)
    OVERRIDING SYSTEM VALUE
    SELECT t.queue_id, t.seq, t.id, $2, nullif($5, $2), grp.last_turn - total.n + 1 + t.k,
           run.run_id, $3, (SELECT id FROM payload), $7::text, $8::text,
           -- Not before $9 (docs/operating/alerts.md): not due until then, like a retry's backoff.
           $9::timestamptz,
           CASE WHEN t.leader_id IS NOT NULL THEN 'infinity'::timestamptz
                ELSE coalesce($9::timestamptz, now()) END,
           $10::timestamptz, t.answer_key, t.leader_id
    FROM lead t CROSS JOIN grp CROSS JOIN total CROSS JOIN run
    ORDER BY t.id
    RETURNING queue_id, seq, leader_id IS NOT NULL AS copies
)
SELECT 'unknown' AS kind, id AS value, 0::bigint AS seq, false AS copies
FROM subs WHERE NOT known
UNION ALL
SELECT 'marked', id, 0, false FROM subs WHERE known AND marked AND NOT $6::boolean
UNION ALL
SELECT 'queued', queue_id, seq, copies FROM inserted
UNION ALL
-- The run the new rows joined (none joined: no run).
SELECT 'run', run.run_id, 0, false FROM run, total WHERE total.n > 0
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
-- What an enqueue of these ids would do, writing nothing (docs/concepts.md): how
-- many rows it would add (known, without a live row, not marked unless $3
-- remark) and how many are marked already; the unknown ids; what a row of the
-- assignment is expected to use (aiqueue_estimate) and cost in its pool ($5,
-- $6: the money plan); the group's and pool's spend in the windows that hold
-- now; and what runs ahead of it in its pool.
-- The same answer (docs/same-answer.md): `rows` counts only the answers that
-- will be marked, `same_answers` the rows that would copy a mark, keyed and led
-- as the enqueue keys and leads them ($7/$8 the key's pads, NULL: mark_each;
-- $11 loose; $9 the kind; $10 the payload; $4 the group; $12 the lane).
WITH ids AS MATERIALIZED (
    SELECT DISTINCT t.id FROM unnest($1::uuid[]) AS t (id)
),
subs AS MATERIALIZED (
    SELECT ids.id, s.id IS NOT NULL AS known, s.ai_marked_at IS NOT NULL AS marked,
           EXISTS (SELECT 1 FROM ai_marking_queue q
                   WHERE q.submission_id = ids.id AND q.phase = 'live'
                     AND q.status IN ('pending', 'processing')
                     AND (NOT $3::boolean OR q.payload_id IS NOT DISTINCT FROM
                          (SELECT aiqueue_payload_id($10::jsonb))))
               AS live,
           aiqueue_answer_key(s.content, $7::bytea, $8::bytea, $11::boolean) AS answer_key
    FROM ids LEFT JOIN submissions s ON s.id = ids.id
),
adds AS MATERIALIZED (
    SELECT answer_key FROM subs WHERE known AND NOT live AND (NOT marked OR $3::boolean)
),
marks AS (
    SELECT (SELECT count(*) FROM adds WHERE answer_key IS NULL)
           + (SELECT count(DISTINCT a.answer_key) FROM adds a
              WHERE a.answer_key IS NOT NULL
                AND NOT EXISTS (
                    SELECT 1 FROM ai_marking_queue q
                    WHERE q.answer_key = a.answer_key
                      AND coalesce(q.group_key, q.assignment_id) = $4::text
                      AND q.leader_id IS NULL
                      AND q.phase = 'live' AND q.status IN ('pending', 'processing')
                      AND q.pool = $5::text AND q.kind = $9::text AND q.lane = $12::text
                      AND q.held_run_after IS NULL
                      AND (q.not_before IS NULL OR q.not_before <= now())
                      AND coalesce(q.payload_id, 0) = coalesce((
                          SELECT p.id FROM ai_marking_payloads p
                          WHERE p.sha256 = sha256(convert_to($10::jsonb::text, 'UTF8'))
                            AND $10::jsonb <> '{}'::jsonb), 0))) AS n
),
est AS (
    SELECT * FROM aiqueue_estimate($5::text, $2::text)
)
SELECT (SELECT n FROM marks) AS rows,
       (SELECT count(*) FROM adds) - (SELECT n FROM marks) AS same_answers,
       (SELECT count(*) FROM subs WHERE known AND marked AND NOT $3::boolean) AS already_marked,
       (SELECT coalesce(array_agg(id), '{}') FROM subs WHERE NOT known) AS unknown_ids,
       est.prompt_tokens, est.completion_tokens, est.source,
       coalesce(est.cost_usd, aiqueue_price_usd($6::jsonb, $5::text, est.model,
                                                est.prompt_tokens, est.completion_tokens))
           AS row_cost_usd,
       aiqueue_batch_price_usd($6::jsonb, $5::text, est.model, est.prompt_tokens,
                               est.completion_tokens, est.cost_usd) AS batch_row_cost_usd,
       sp.group_hour, sp.group_day, sp.pool_day,
       -- What runs before these rows (docs/concepts.md#an-estimate-first): the
       -- pool's rows due now (not a row waiting for its not_before, its run's
       -- calibration, a batch or its same answer's leader; counted up to
       -- 100,000), and those at its function.
       (SELECT count(*) FROM (SELECT 1 FROM ai_marking_ready q
                              WHERE q.pool = $5::text AND q.run_after <= now()
                              LIMIT 100000) due)
       + (SELECT count(*) FROM ai_marking_claimed c
          JOIN ai_marking_queue q ON q.queue_id = c.queue_id
          WHERE q.status = 'processing' AND c.pool = $5::text)
           AS ahead
FROM est, aiqueue_spend_now($6::jsonb -> $5::text, $5::text, $4::text) sp;
