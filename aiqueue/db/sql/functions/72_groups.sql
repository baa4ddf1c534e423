-- The same answer is marked once (docs/same-answer.md).
--
-- The enqueue keys each answer (aiqueue_answer_key) and makes the first live
-- row of each (pool, kind, payload, group, lane, key) that can run now its
-- leader (never one held by a not_before ahead or its run's calibration; a
-- spend cap holds a group, so a follower of its own group waits no longer
-- than its leader); the others are
-- followers: pending, leader_id set, run_after = 'infinity', so no claim and
-- no batch packer ever takes them.  The leader's move ends the wait
-- (aiqueue_groups_moved, called by the function that moves it, 74_moved.sql):
--   completed                      every follower completes with a copy of its
--                                  result, with zero usage and zero cost, in the
--                                  same transaction (aiqueue_group_complete)
--   failed for good, cancelled,    the first follower leads, with no attempt
--   expired                        used (aiqueue_group_lead)
-- and so does its erasure: ai_marking_queue_group_erased, a trigger, because a
-- row is also deleted by host SQL (a submission deleted cascades to its rows).
-- A follower is exactly a pending row with leader_id set and run_after
-- 'infinity' (a row an operator retried has a finite run_after: it is marked
-- on its own).

-- The answer as keyed (docs/same-answer.md): Unicode NFKC, whitespace runs made
-- one space, trimmed; case is kept ("CO" is carbon monoxide, "Co" cobalt).
-- `loose` (a kind's same_answers = "loose") also lowers case (then ß → ss and
-- ς → σ, what case folding adds for the scripts schools write in) and drops a
-- final `.` or `!`.  aiqueue/answers.py normalise() is its specification;
-- tests/integration/test_same_answer_key.py holds the two to one table.
-- The common case first, at a fraction of the cost (the enqueue keys 10,000
-- answers in its one statement): printable ASCII words with single spaces,
-- which NFKC, the folds, the collapse and the trim leave as they are, and
-- whose lower case the "C" collation gives byte by byte.
CREATE OR REPLACE FUNCTION aiqueue_answer_norm(answer text, loose boolean) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN answer ~ '^[!-~]+( [!-~]+)*$'
        THEN CASE WHEN NOT loose THEN answer
                  WHEN right(answer, 1) IN ('.', '!')
                  THEN rtrim(left(lower(answer COLLATE "C"), -1), ' ')
                  ELSE lower(answer COLLATE "C") END
        WHEN NOT loose
        THEN btrim(regexp_replace(normalize(answer, NFKC),
                 '[\t\n\v\f\r \u001c-\u001f\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+',
                 ' ', 'g'), ' ')
        ELSE btrim(regexp_replace(btrim(regexp_replace(
                 replace(translate(lower(normalize(answer, NFKC)), 'ς', 'σ'), 'ß', 'ss'),
                 '[\t\n\v\f\r \u001c-\u001f\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+',
                 ' ', 'g'), ' '), '[.!]$', ''), ' ')
    END
$$;

-- HMAC-SHA256 of the normalised answer (RFC 2104, with the built-in sha256):
-- `inner_pad` and `outer_pad` are the key, padded to sha256's 64-byte block,
-- XORed with 0x36 and 0x5c (aiqueue/answers.py AnswerKey).  NULL pads
-- ("mark_each", a kind's "off") or no content: NULL, a row marked on its own.
-- STABLE as convert_to is: so the planner inlines it into the enqueue (an
-- IMMUTABLE wrapper around a STABLE call is run row by row, twice as slow).
CREATE OR REPLACE FUNCTION aiqueue_answer_key(answer text, inner_pad bytea, outer_pad bytea,
                                              loose boolean)
RETURNS bytea LANGUAGE sql STABLE PARALLEL SAFE AS $$
    -- mark_each (no pads) normalises nothing.
    SELECT CASE WHEN inner_pad IS NOT NULL AND answer IS NOT NULL
                THEN sha256(outer_pad || sha256(inner_pad || convert_to(
                                                    aiqueue_answer_norm(answer, loose), 'UTF8')))
           END
$$;

-- The leader `p_leader` completed: its followers complete with its result
-- (the one its submission now holds), zero usage and zero cost.  Locks: the
-- followers' rows, then their submissions, each in key order (the erasure's
-- order).  Each copy gets its own result record, so it is reviewed on its
-- own, and its own move's effects (74_moved.sql; `p_locked` as there).
CREATE OR REPLACE FUNCTION aiqueue_group_complete(p_leader uuid, p_locked boolean)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer;
    copies ai_marking_queue[];
BEGIN
    WITH lead AS (
        SELECT s.ai_result AS result, q.usage ->> 'model' AS model
        FROM ai_marking_queue q JOIN submissions s ON s.id = q.submission_id
        WHERE q.queue_id = p_leader
    ),
    rows AS MATERIALIZED (
        SELECT q.queue_id, q.submission_id, q.assignment_id, q.run_id, q.group_key, q.kind,
               q.pool, q.lane, q.payload_id, q.created_at
        FROM ai_marking_ready r JOIN ai_marking_queue_live q ON q.queue_id = r.queue_id
        WHERE r.leader_id = p_leader AND r.run_after = 'infinity' AND q.status = 'pending'
        ORDER BY q.queue_id
        FOR UPDATE OF q
    ),
    prev AS MATERIALIZED (
        SELECT s.id, s.ai_result, s.ai_marked_at
        FROM submissions s JOIN rows ON s.id = rows.submission_id
        ORDER BY s.id
        FOR UPDATE OF s
    ),
    sub AS (
        UPDATE submissions s SET ai_result = lead.result, ai_marked_at = now()
        FROM prev, lead WHERE s.id = prev.id
    ),
    done AS (
        UPDATE ai_marking_queue q
        SET status = 'completed', finished_at = now(), last_error = NULL, run_after = now(),
            usage = jsonb_build_object('prompt_tokens', 0, 'completion_tokens', 0,
                                       'cost_usd', 0, 'model', lead.model,
                                       'same_answer_as', p_leader),
            updated_at = now(), queue_moves = q.queue_moves + 1
        FROM rows, lead
        WHERE q.queue_id = rows.queue_id
          AND q.status IN ('pending', 'processing')  -- the live part alone (aiqueue 0078)
        RETURNING q
    ),
    record AS (
        INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, run_id, "group",
                                        result, previous_result, previous_marked_at, model,
                                        prompt_tokens, completion_tokens, cost_usd,
                                        processing_seconds, kind, pool, lane, payload_version)
        SELECT r.queue_id, r.submission_id, r.assignment_id, r.run_id, r.group_key,
               lead.result, prev.ai_result, prev.ai_marked_at, lead.model, 0, 0, 0, NULL,
               r.kind, r.pool, r.lane, aiqueue_payload_version(r.payload_id)
        FROM rows r JOIN prev ON prev.id = r.submission_id CROSS JOIN lead
        -- One record per row: the results are month partitions (97_partitions.sql),
        -- whose parent has no key to conflict on.  A record of the row is no older
        -- than the row, so only the months since it was created are looked at.
        WHERE NOT EXISTS (SELECT 1 FROM ai_marking_results m
                          WHERE m.queue_id = r.queue_id AND m.applied_at >= aiqueue_months_from(r.created_at))
    )
    SELECT count(*), array_agg(d.q ORDER BY (d.q).queue_id) INTO n, copies FROM done d;
    IF n > 0 THEN  -- each copy moved pending -> completed; no copy leads a group
        PERFORM aiqueue_feed_moved(copies);
        PERFORM aiqueue_counts_moved(copies, array_fill('pending'::text, ARRAY[n]));
        PERFORM aiqueue_calibration_moved(copies, array_fill('pending'::text, ARRAY[n]));
        PERFORM aiqueue_outbox_moved(copies, array_fill('pending'::text, ARRAY[n]), p_locked);
    END IF;
    -- A held result holds each copy too (86_holds); nothing for any other.
    PERFORM aiqueue_hold(q, s.ai_result) FROM ai_marking_queue q JOIN submissions s
    ON s.id = q.submission_id AND s.ai_result -> 'review_required' = 'true'::jsonb
    WHERE n > 0 AND q.leader_id = p_leader AND q.status = 'completed'
      AND q.usage ->> 'same_answer_as' = p_leader::text;
    RETURN n;
END
$$;

-- The leader `p_gone` left its group without a result: its first follower
-- (in enqueue order) leads, due at once (a batch-lane row: when the leader
-- would have gone live, `p_live_at`), and the others follow it.
CREATE OR REPLACE FUNCTION aiqueue_group_lead(p_gone uuid, p_live_at timestamptz)
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    heir uuid;
BEGIN
    SELECT q.queue_id INTO heir
    FROM ai_marking_ready r JOIN ai_marking_queue_live q ON q.queue_id = r.queue_id
    WHERE r.leader_id = p_gone AND r.run_after = 'infinity' AND q.status = 'pending'
    ORDER BY r.seq LIMIT 1
    FOR UPDATE OF q;
    IF heir IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE ai_marking_queue_live q
    SET leader_id = heir, updated_at = now()
    FROM ai_marking_ready r
    WHERE r.leader_id = p_gone AND r.run_after = 'infinity' AND r.queue_id <> heir
      AND q.queue_id = r.queue_id AND q.status = 'pending';
    -- Due sooner: the fair walk's trigger (40_fair) forgets the group's due_at.
    UPDATE ai_marking_queue_live q
    SET leader_id = NULL, updated_at = now(),
        run_after = CASE WHEN q.lane = 'batch' AND p_live_at > now()
                              AND p_live_at < 'infinity'
                         THEN p_live_at
                         ELSE greatest(now(), q.not_before) END
    WHERE q.queue_id = heir;
    RETURN heir;
END
$$;

-- A leader completed.  Most leaders have no follower (their answers are
-- distinct): one probe of the followers' index, and the copy's statement,
-- whose start opens every index of the tables it writes, stays out.  No
-- follower can join meanwhile: an enqueue share-locks the leader it joins, and
-- this row is locked until commit.
CREATE OR REPLACE FUNCTION aiqueue_group_done(p_leader uuid, p_locked boolean)
RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ai_marking_ready r
               WHERE r.leader_id = p_leader AND r.run_after = 'infinity') THEN
        RETURN aiqueue_group_complete(p_leader, p_locked);
    END IF;
    RETURN 0;
END
$$;

-- Leaders that moved, one move's (74_moved.sql): a leader that completed gives
-- its followers its result (aiqueue_group_done); one that ended without a
-- result (failed, cancelled, expired) hands the group to its first follower
-- (aiqueue_group_lead), due when the leader would have gone live: `live_at`,
-- each row's run_after before the move where the move changed it (NULL: the
-- row's own).  In key order, the order the copies lock their rows in.
CREATE OR REPLACE FUNCTION aiqueue_groups_moved(moved ai_marking_queue[], was text[],
                                                live_at timestamptz[], p_locked boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM CASE WHEN m.status = 'completed'
                 THEN aiqueue_group_done(m.queue_id, p_locked)::text
                 ELSE aiqueue_group_lead(m.queue_id,
                                         coalesce(live_at[m.ordinality], m.run_after))::text END
    FROM unnest(moved) WITH ORDINALITY AS m
    WHERE m.answer_key IS NOT NULL AND m.leader_id IS NULL
      AND was[m.ordinality] IS DISTINCT FROM m.status
      AND (m.status = 'completed'
           OR (m.status IN ('failed', 'cancelled', 'expired')
               AND was[m.ordinality] IN ('pending', 'processing')))
    ORDER BY m.queue_id;
END
$$;

-- A leader erased (its row deleted, by the queue or by host SQL): as if it left.
-- A statement trigger: a row trigger on delete would also fire when a leader's
-- end moves its row to its month (a delete and an insert to PostgreSQL: aiqueue
-- 0078); statement triggers fire for the statement's own verb only.
CREATE OR REPLACE FUNCTION aiqueue_group_left() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM aiqueue_group_lead(o.queue_id, o.run_after)
    FROM old_rows o
    WHERE o.status IN ('pending', 'processing') AND o.answer_key IS NOT NULL
      AND o.leader_id IS NULL
    ORDER BY o.queue_id;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER ai_marking_queue_group_erased
    AFTER DELETE ON ai_marking_queue REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_group_left();
