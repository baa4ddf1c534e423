-- Every SQL function and trigger of aiqueue, in its current text.
--
-- `migrate up` applies this file after the schema migrations, in the same
-- transaction, whenever its text changed (or a migration ran): migrations hold
-- schema only, and a function's history is this file's git log.  Everything
-- here must be idempotent: CREATE OR REPLACE, and a DROP ... IF EXISTS first
-- where a signature or a trigger's shape changes.
--
-- The hot statements live in plpgsql functions: without a client-side
-- prepared-statement cache (transaction poolers forbid one), plpgsql is what
-- lets the server cache their plans per backend instead of planning each call.

-- The gate, "may a row be dispatched now?", written once.  Pause, busy
-- back-off, the in-flight cap and the circuit breaker; when the breaker is
-- open, one probe may run after the cool-down (half-open) and only while
-- nothing else is in flight.  aiqueue_gate_opens_at says *when* the gate opens
-- by time alone (NULL: not by waiting; an operator, a result or a lease must
-- act first); aiqueue_gate is "that moment has come".  Both are plain SQL
-- expressions, which the planner inlines into their callers.
CREATE OR REPLACE FUNCTION aiqueue_gate_opens_at(ctl ai_queue_control, in_flight bigint,
                                                 cap integer, breaker_threshold integer)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN ctl.paused OR (cap <> 0 AND in_flight >= cap)
             OR (ctl.consecutive_failures >= breaker_threshold AND in_flight > 0) THEN NULL
        ELSE greatest(coalesce(ctl.busy_until, '-infinity'),
                      CASE WHEN ctl.consecutive_failures >= breaker_threshold
                           THEN coalesce(ctl.circuit_open_until, '-infinity')
                           ELSE '-infinity' END)
    END
$$;

CREATE OR REPLACE FUNCTION aiqueue_gate(ctl ai_queue_control, in_flight bigint, cap integer,
                                        breaker_threshold integer)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce(aiqueue_gate_opens_at(ctl, in_flight, cap, breaker_threshold) <= now(),
                    false)
$$;

-- The breaker as the operator sees it: open (cooling down), half_open (a probe
-- may go, or is out), closed.
CREATE OR REPLACE FUNCTION aiqueue_circuit_state(ctl ai_queue_control, breaker_threshold integer)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN ctl.consecutive_failures < breaker_threshold THEN 'closed'
        WHEN coalesce(ctl.circuit_open_until, '-infinity') > now() THEN 'open'
        ELSE 'half_open'
    END
$$;

-- Rows holding a slot, counted only as far as the gate needs (up to the cap;
-- up to 1 when unlimited, for the half-open breaker).  The ORDER BY keeps the
-- count on ai_marking_queue_lease_idx even when the statistics are stale: a
-- plain count(*) is planned as a scan of the whole table whenever they say many
-- rows hold a lease (e.g. before the first ANALYZE of a big enqueue).
CREATE OR REPLACE FUNCTION aiqueue_in_flight(cap integer) RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) INTO n FROM (
        SELECT 1 FROM ai_marking_queue p WHERE p.lease_at IS NOT NULL
        ORDER BY p.lease_at LIMIT greatest(cap, 1)) leased;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION aiqueue_gate_open(cap integer, breaker_threshold integer)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    ctl ai_queue_control%ROWTYPE;
    in_flight bigint;
BEGIN
    SELECT * INTO ctl FROM ai_queue_control c WHERE c.id = 1;
    in_flight := aiqueue_in_flight(cap);
    RETURN aiqueue_gate(ctl, in_flight, cap, breaker_threshold);
END
$$;

-- Claim exactly one due row.  The advisory lock serialises count-and-claim
-- across every instance until this transaction ends, so the in-flight cap
-- cannot be overshot; each statement below takes a fresh snapshot (READ
-- COMMITTED), so it sees what the previous lock holder committed.  `more` says
-- whether another row could be claimed right now (the caller chains on it);
-- `breaker_dirty` whether a successful dispatch must reset the breaker.
CREATE OR REPLACE FUNCTION aiqueue_claim(cap integer, breaker_threshold integer)
RETURNS TABLE (queue_id uuid, submission_id uuid, assignment_id text, attempts integer,
               dispatch_seq integer, payload text, content text, more boolean,
               breaker_dirty boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    in_flight bigint;
    ctl ai_queue_control%ROWTYPE;
BEGIN
    PERFORM pg_advisory_xact_lock(7301730173017301);
    SELECT * INTO ctl FROM ai_queue_control c WHERE c.id = 1;
    in_flight := aiqueue_in_flight(cap);
    IF NOT aiqueue_gate(ctl, in_flight, cap, breaker_threshold) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH next AS MATERIALIZED (
        -- Walks ai_marking_queue_claim_idx in dispatch order: priority, then
        -- turns between groups (aiqueue 0007), then enqueue order; rows waiting
        -- out a backoff are stepped over, not waited for.  SKIP LOCKED steps over
        -- rows a webhook or the recovery holds right now.
        SELECT q.queue_id
        FROM ai_marking_queue q
        WHERE q.status = 'pending' AND q.run_after <= now()
        ORDER BY q.priority DESC, q.turn, q.seq
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ),
    claimed AS (
        UPDATE ai_marking_queue q
        SET status = 'processing', attempts = q.attempts + 1, dispatch_seq = q.dispatch_seq + 1,
            started_at = now(), lease_at = now(), progress = NULL, updated_at = now()
        FROM next
        WHERE q.queue_id = next.queue_id
        RETURNING q.queue_id, q.submission_id, q.assignment_id, q.attempts, q.dispatch_seq,
                  q.payload_id
    ),
    history AS (
        INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt)
        SELECT cl.queue_id, cl.dispatch_seq, cl.attempts FROM claimed cl
    )
    SELECT cl.queue_id, cl.submission_id, cl.assignment_id, cl.attempts, cl.dispatch_seq,
           -- The enqueue's payload, stored once (migration 0014); none is '{}'.
           coalesce(pl.payload, '{}'::jsonb)::text, s.content,
           ctl.consecutive_failures < breaker_threshold
               AND (cap = 0 OR in_flight + 1 < cap)
               -- The first two due rows in dispatch order (this statement's
               -- snapshot still sees the claimed one as pending).
               AND EXISTS (SELECT 1 FROM (
                       SELECT o.queue_id FROM ai_marking_queue o
                       WHERE o.status = 'pending' AND o.run_after <= now()
                       ORDER BY o.priority DESC, o.turn, o.seq
                       LIMIT 2) due
                   WHERE due.queue_id <> cl.queue_id),
           ctl.consecutive_failures > 0 OR ctl.circuit_open_until IS NOT NULL
    FROM claimed cl JOIN submissions s ON s.id = cl.submission_id
    LEFT JOIN ai_marking_payloads pl ON pl.id = cl.payload_id;
END
$$;

-- The processing-time buckets of the /metrics histogram (upper bounds, seconds).
CREATE OR REPLACE FUNCTION aiqueue_buckets() RETURNS float8[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY[0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600]::float8[]
$$;

-- Apply a result at most once: the row lock plus the status test mean a second
-- (concurrent or later) delivery finds the row completed and changes nothing.
-- A late result of an earlier dispatch still completes a row that is not done.
-- In the same statement: the review record of what the result replaced
-- (ai_marking_results) and one counter delta (ai_marking_tally).
CREATE OR REPLACE FUNCTION aiqueue_complete(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                                 p_dispatch_seq integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH row AS (
        SELECT q.queue_id, q.submission_id, q.assignment_id, q.run_id, q.group_key,
               date_part('epoch', now() - q.started_at) AS seconds
        FROM ai_marking_queue q
        WHERE q.queue_id = p_queue_id AND q.status IN ('pending', 'processing', 'failed')
        FOR UPDATE
    ),
    -- What the result replaces.  The lock makes this read the newest committed
    -- mark (a revert that committed while we waited), not this statement's
    -- snapshot: the record then says exactly what a revert must restore.
    prev AS (
        SELECT s.id, s.ai_result, s.ai_marked_at
        FROM submissions s JOIN row ON s.id = row.submission_id
        FOR UPDATE OF s
    ),
    sub AS (
        UPDATE submissions s SET ai_result = p_result, ai_marked_at = now()
        FROM prev WHERE s.id = prev.id
        RETURNING s.id
    ),
    done AS (
        UPDATE ai_marking_queue q
        SET status = 'completed', finished_at = now(), last_error = NULL,
            usage = p_usage, updated_at = now(),
            -- A late result of an earlier dispatch: the current one is still at
            -- the function, so the row keeps its slot until that one reports
            -- or its lease runs out; otherwise the function would get one
            -- job more than the cap.
            lease_at = CASE WHEN q.status = 'processing' AND q.dispatch_seq <> p_dispatch_seq
                            THEN q.lease_at END
        FROM row, sub
        WHERE q.queue_id = row.queue_id
        RETURNING q.queue_id
    ),
    history AS (
        UPDATE ai_marking_attempts a
        SET ended_at = now(), usage = p_usage,
            outcome = CASE WHEN a.ended_at IS NULL THEN 'completed' ELSE 'completed_late' END
        FROM done
        WHERE a.queue_id = done.queue_id AND a.dispatch_seq = p_dispatch_seq
          AND a.kind = 'dispatch'
        RETURNING a.outcome
    ),
    usage AS (
        SELECT p_usage ->> 'model' AS model,
               coalesce(aiqueue_usage_int(p_usage -> 'prompt_tokens'), 0) AS prompt_tokens,
               coalesce(aiqueue_usage_int(p_usage -> 'completion_tokens'), 0)
                   AS completion_tokens,
               CASE WHEN jsonb_typeof(p_usage -> 'cost_usd') = 'number'
                    THEN (p_usage ->> 'cost_usd')::numeric END AS cost_usd
    ),
    record AS (
        INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, run_id, "group",
                                        result, previous_result, previous_marked_at, model,
                                        prompt_tokens, completion_tokens, cost_usd,
                                        processing_seconds)
        SELECT row.queue_id, row.submission_id, row.assignment_id, row.run_id, row.group_key,
               p_result, prev.ai_result, prev.ai_marked_at, u.model,
               aiqueue_usage_int(p_usage -> 'prompt_tokens'),
               aiqueue_usage_int(p_usage -> 'completion_tokens'), u.cost_usd, row.seconds
        FROM row JOIN prev ON prev.id = row.submission_id JOIN done ON true, usage u
        -- A backfilled record (migration 0008) of a row completed before: keep it.
        ON CONFLICT (queue_id) DO NOTHING
    ),
    tally AS (
        INSERT INTO ai_marking_tally (outcome, job, model, le, prompt_tokens, completion_tokens,
                                      cost_usd, seconds)
        SELECT coalesce((SELECT h.outcome FROM history h LIMIT 1), 'completed'), 'completed',
               u.model,
               (SELECT min(b) FROM unnest(aiqueue_buckets()) b WHERE b >= row.seconds),
               u.prompt_tokens, u.completion_tokens, coalesce(u.cost_usd, 0),
               coalesce(row.seconds, 0)
        FROM done, row, usage u
    )
    SELECT count(*) INTO n FROM done;
    IF n = 0 THEN
        -- The current dispatch of a row a late result completed: its slot is free.
        UPDATE ai_marking_queue q SET lease_at = NULL
        WHERE q.queue_id = p_queue_id AND q.status = 'completed'
          AND q.dispatch_seq = p_dispatch_seq AND q.lease_at IS NOT NULL;
    END IF;
    RETURN n > 0;
END
$$;

-- A token count from a usage object: a non-negative whole number, else NULL.
CREATE OR REPLACE FUNCTION aiqueue_usage_int(v jsonb) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(v) = 'number' AND (v::text)::numeric >= 0
                     AND (v::text)::numeric < 1e15
                THEN round((v::text)::numeric)::bigint END
$$;

-- A completed result, then the next claim, in one transaction.  The claim runs
-- whether or not the result was new: the gate decides whether a slot is free
-- (a late result's duplicate may find one).  Always exactly one row: `applied`,
-- and the claimed job's columns (NULL when nothing was claimed).  Locks: the
-- completion holds its row while the claim waits for the advisory lock, whose
-- holder never waits for a row lock (SKIP LOCKED), so this cannot deadlock.
CREATE OR REPLACE FUNCTION aiqueue_settle(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                               p_dispatch_seq integer, cap integer,
                               breaker_threshold integer)
RETURNS TABLE (applied boolean, queue_id uuid, submission_id uuid, assignment_id text,
               attempts integer, dispatch_seq integer, payload text, content text,
               more boolean, breaker_dirty boolean)
LANGUAGE plpgsql AS $$
BEGIN
    applied := aiqueue_complete(p_queue_id, p_result, p_usage, p_dispatch_seq);
    RETURN QUERY SELECT applied, c.* FROM aiqueue_claim(cap, breaker_threshold) c;
    IF NOT FOUND THEN
        RETURN NEXT;
    END IF;
END
$$;

-- Wake live-event listeners, if any instance has one.  NOTIFY folds identical
-- notifications of one transaction into one.
CREATE OR REPLACE FUNCTION aiqueue_notify() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ai_queue_control c WHERE c.id = 1 AND c.listened_until > now()) THEN
        PERFORM pg_notify('ai_marking', '');
    END IF;
END
$$;

-- A status change is one row on the hot path: its event (live UIs), its count
-- deltas (stats) and the wake-up of listeners, in one trigger call.
CREATE OR REPLACE FUNCTION aiqueue_record_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, summary)
    VALUES (NEW.assignment_id, NEW.queue_id, NEW.submission_id, NEW.status,
            CASE WHEN NEW.status = 'completed' THEN (
                SELECT jsonb_strip_nulls(jsonb_build_object(
                    'score', s.ai_result -> 'score', 'max_score', s.ai_result -> 'max_score'))
                FROM submissions s WHERE s.id = NEW.submission_id) END);
    INSERT INTO ai_marking_counts (status, n) VALUES (OLD.status, -1), (NEW.status, 1);
    PERFORM aiqueue_notify();
    RETURN NULL;
END
$$;

-- An enqueue's rows: one batch row per assignment and status (migration 0009).
-- Both arrays aggregate the same stream of rows, so they stay aligned; their
-- order is the group's, not the enqueue's (sorting them by seq cost 11 ms of
-- 10,000 rows, and the rows' events share one transaction anyway).
CREATE OR REPLACE FUNCTION aiqueue_record_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ai_marking_events (assignment_id, status, queue_ids, submission_ids)
    SELECT assignment_id, status, array_agg(queue_id), array_agg(submission_id)
    FROM new_rows GROUP BY assignment_id, status;
    PERFORM aiqueue_notify();
    RETURN NULL;
END
$$;

-- Bulk statements (an enqueue, a prune, a cascade from submissions) add one
-- grouped delta per status; a single status change (the hot path) is a
-- row-level trigger, filtered by WHEN, whose plan plpgsql caches.
CREATE OR REPLACE FUNCTION aiqueue_count_changes() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- The change feed and the per-status count deltas, bound to the queue table.
-- An enqueue inserts thousands of rows at once: statement-level triggers with
-- transition tables.  A status change is one row on the hot path: a row-level
-- trigger, filtered by WHEN before any function call.
CREATE OR REPLACE TRIGGER ai_marking_queue_events_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_record_inserts();
CREATE OR REPLACE TRIGGER ai_marking_queue_events_upd
    AFTER UPDATE OF status ON ai_marking_queue
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION aiqueue_record_move();
CREATE OR REPLACE TRIGGER ai_marking_queue_counts_ins
    AFTER INSERT ON ai_marking_queue REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_count_changes();
CREATE OR REPLACE TRIGGER ai_marking_queue_counts_del
    AFTER DELETE ON ai_marking_queue REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION aiqueue_count_changes();

-- A review action on one applied result, in the row's history (while the queue
-- still has the row) and in the live feed (the page updates its mark).
CREATE OR REPLACE FUNCTION aiqueue_review_recorded(p_queue_id uuid, action text,
                                                   p_actor text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r ai_marking_results%ROWTYPE;
BEGIN
    SELECT * INTO r FROM ai_marking_results m WHERE m.queue_id = p_queue_id;
    INSERT INTO ai_marking_attempts (queue_id, kind, outcome, ended_at, actor)
    SELECT q.queue_id, 'action', action, now(), p_actor
    FROM ai_marking_queue q WHERE q.queue_id = r.queue_id;
    INSERT INTO ai_marking_events (assignment_id, queue_id, submission_id, status, summary)
    SELECT r.assignment_id, r.queue_id, r.submission_id, 'completed',
           jsonb_strip_nulls(jsonb_build_object(
               'score', s.ai_result -> 'score', 'max_score', s.ai_result -> 'max_score',
               'review', CASE action WHEN 'accept' THEN 'accepted' ELSE 'reverted' END))
    FROM submissions s WHERE s.id = r.submission_id;
    PERFORM aiqueue_notify();
END
$$;

-- Revert one applied result: the submission's mark goes back to what it was
-- before it.  Locks the submission first, as aiqueue_complete does (after the
-- queue row, which a revert never locks), so a revert and a result for the same
-- submission serialise; every statement after the lock reads what the other
-- committed.  outcome: reverted, superseded (a later result is still applied),
-- not_completed (no applied result, or reverted already) or not_found.
CREATE OR REPLACE FUNCTION aiqueue_revert(p_queue_id uuid, p_actor text)
RETURNS TABLE (outcome text, reverted_at timestamptz) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r ai_marking_results%ROWTYPE;
BEGIN
    SELECT * INTO r FROM ai_marking_results m WHERE m.queue_id = p_queue_id;
    IF NOT FOUND THEN
        outcome := CASE WHEN EXISTS (SELECT 1 FROM ai_marking_queue q
                                     WHERE q.queue_id = p_queue_id)
                        THEN 'not_completed' ELSE 'not_found' END;
        RETURN NEXT;
        RETURN;
    END IF;
    PERFORM 1 FROM submissions s WHERE s.id = r.submission_id FOR UPDATE;
    SELECT * INTO r FROM ai_marking_results m WHERE m.queue_id = p_queue_id FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'not_found';  -- its submission was deleted meanwhile
    ELSIF r.review = 'reverted' THEN
        outcome := 'not_completed';
    ELSIF EXISTS (SELECT 1 FROM ai_marking_results l
                  WHERE l.submission_id = r.submission_id AND l.seq > r.seq
                    AND l.review <> 'reverted') THEN
        outcome := 'superseded';
    ELSE
        UPDATE submissions s SET ai_result = r.previous_result,
                                 ai_marked_at = r.previous_marked_at
        WHERE s.id = r.submission_id;
        UPDATE ai_marking_results m SET review = 'reverted', reverted_at = now(),
                                        actor = p_actor
        WHERE m.queue_id = p_queue_id
        RETURNING * INTO r;
        PERFORM aiqueue_review_recorded(p_queue_id, 'revert', p_actor);
        outcome := 'reverted';
        reverted_at := r.reverted_at;
    END IF;
    RETURN NEXT;
END
$$;

-- Accept one applied result (again: a newer adjustment replaces the older one).
CREATE OR REPLACE FUNCTION aiqueue_accept(p_queue_id uuid, p_actor text, p_adjusted jsonb)
RETURNS TABLE (outcome text, accepted_at timestamptz) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r ai_marking_results%ROWTYPE;
BEGIN
    UPDATE ai_marking_results m
    SET review = 'accepted', accepted_at = now(), actor = p_actor,
        adjusted_result = coalesce(p_adjusted, m.adjusted_result)
    WHERE m.queue_id = p_queue_id AND m.review <> 'reverted'
    RETURNING * INTO r;
    IF FOUND THEN
        PERFORM aiqueue_review_recorded(p_queue_id, 'accept', p_actor);
        outcome := 'accepted';
        accepted_at := r.accepted_at;
    ELSIF EXISTS (SELECT 1 FROM ai_marking_results m WHERE m.queue_id = p_queue_id)
          OR EXISTS (SELECT 1 FROM ai_marking_queue q WHERE q.queue_id = p_queue_id) THEN
        outcome := 'not_completed';
    ELSE
        outcome := 'not_found';
    END IF;
    RETURN NEXT;
END
$$;

-- The run a review of "the assignment" means: its newest queue row's run, or
-- (queue rows pruned) its newest result's.
CREATE OR REPLACE FUNCTION aiqueue_latest_run(p_assignment_id text) RETURNS uuid
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT q.run_id FROM ai_marking_queue q WHERE q.assignment_id = p_assignment_id
         ORDER BY q.created_at DESC, q.seq DESC LIMIT 1),
        (SELECT m.run_id FROM ai_marking_results m WHERE m.assignment_id = p_assignment_id
         ORDER BY m.seq DESC LIMIT 1))
$$;

-- Accept or revert every unreviewed result of the assignment's latest run, in
-- one transaction.  Submission order keeps two concurrent run reverts from
-- locking the same submissions in opposite orders.
CREATE OR REPLACE FUNCTION aiqueue_review_run(p_assignment_id text, p_action text,
                                              p_actor text)
RETURNS TABLE (done integer, superseded integer) LANGUAGE plpgsql AS $$
DECLARE
    q uuid;
    o text;
BEGIN
    done := 0;
    superseded := 0;
    FOR q IN SELECT m.queue_id FROM ai_marking_results m
             WHERE m.run_id = aiqueue_latest_run(p_assignment_id)
               AND m.assignment_id = p_assignment_id AND m.review = 'unreviewed'
             ORDER BY m.submission_id, m.seq DESC LOOP
        IF p_action = 'accept' THEN
            SELECT a.outcome INTO o FROM aiqueue_accept(q, p_actor, NULL) a;
        ELSE
            SELECT r.outcome INTO o FROM aiqueue_revert(q, p_actor) r;
        END IF;
        IF o IN ('accepted', 'reverted') THEN
            done := done + 1;
        ELSIF o = 'superseded' THEN
            superseded := superseded + 1;
        END IF;
    END LOOP;
    RETURN NEXT;
END
$$;
