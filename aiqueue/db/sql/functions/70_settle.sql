-- A result's settle, in call order: apply, what follows it, raise L, correct
-- the charge, claim the next.  Every write is a call below; the one trigger on
-- the way is 35_ready's, which deletes the claimed row's ready row (it stays a
-- trigger because host SQL writes the record too; its file says more).  Each
-- move counts itself in the row's `queue_moves`, which keeps 74_moved's trigger for
-- a status set by host SQL from firing.
--
-- A webhook's results in one round trip: aiqueue_settle_many (this file,
-- first) locks their rows, then settles each (aiqueue_settle), which calls
--   aiqueue_result         a result, the same for a settle and a lone complete:
--     aiqueue_complete       apply it in one statement, which moves the row from
--                            ai_marking_queue_live to its month of
--                            ai_marking_queue_ended (the statement names the live
--                            part as a constant, so its plan opens no other month;
--                            a late result of a row failed for good first brings
--                            it back, aiqueue_failed_back in 95_recovery), the
--                            row's `queue_moves` counted so that no status trigger
--                            follows it (74_moved; a processing row has no ready
--                            row, so 35_ready's stays out too), priced once by
--                            aiqueue_priced (50_spend's prices), the row's slot
--                            deleted from ai_marking_claimed (a late result of an
--                            earlier dispatch leaves the current one's), its record
--                            and tally by aiqueue_complete_record (73_record);
--                            then what follows the move (74_moved), in order:
--       aiqueue_feed_moved     its live event, with its score (80_feed)
--       aiqueue_counts_moved   its count deltas (80_feed)
--       aiqueue_calibration_moved  a calibration row: its run's gate (88_calibration)
--       aiqueue_group_done     a same-answer leader: its followers' copies, each
--                              with the same effects (72_groups)
--       aiqueue_outbox_moved   the run's end (90_outbox), told that the claim
--                              lock comes next anyway (p_locked)
--                            returns the completed row, which everything after
--                            takes instead of reading it
--     aiqueue_hold           a held result (86_holds)
--     aiqueue_claim_lock     (30_gate) before any row the claim writes too, then:
--     aiqueue_flow_result    raise the learned limit L (71_settle_charge; rule
--                            in 20_flow), and put the usage in place of the
--                            estimate in a declared budget's window (21_budget
--                            counts it)
--     aiqueue_money_result   the prompt cache (aiqueue_cache_result, 46_cache_billed),
--                            learn the estimate, correct the charge
--                            (71_settle_charge; 50_spend, its windows in
--                            48_spend_windows)
--   aiqueue_handback       a repeated result: hand back the row it claimed
--                          (71_settle_charge)
--   aiqueue_claim          the next row (60_claim: 30_gate's room, a first count of
--                          the pool's and kind's rows in ai_marking_claimed (10_plan);
--                          42_fair_pick's walk of ai_marking_ready (40_fair;
--                          43_fair_race: groups other claims are charging;
--                          45_cache), which takes a pool's slot in ai_marking_slots
--                          (36_slots, SKIP LOCKED) before it walks that pool's
--                          groups, and the row's kind's slot before it charges the
--                          group; its money: the budget window in 21_budget, the
--                          spend caps in 50_spend and 48_spend_windows), moved to
--                          processing (a heap-only update of the live part; its ready
--                          row deleted by 35_ready's trigger) with its
--                          ai_marking_claimed row inserted, its live event and count
--                          deltas written (aiqueue_feed_moved, aiqueue_counts_moved),
--                          taken by the settle's caller to send it
--
-- No transaction flag steers any of it: what a step needs to know is a
-- parameter (the run's end is told p_locked).

-- A webhook's completed results, each settled in turn (aiqueue_settle), in one
-- statement: one row per item, in the items' order, with the row claimed for
-- it.  `items`: [{"queue_id", "dispatch_seq", "result", "usage"}].  Locks:
-- every item's queue row, then its submission, first, each in one order, so
-- no later wait for a row lock comes while this holds the claim lock (which
-- the first settle takes, and a claim's holder never waits for a row lock).
CREATE OR REPLACE FUNCTION aiqueue_settle_many(items jsonb, plan jsonb, p_taker uuid)
RETURNS TABLE (item uuid, applied boolean, queue_id uuid, submission_id uuid,
               assignment_id text, attempts integer, dispatch_seq integer, payload text,
               content text, more boolean, breaker_dirty boolean, kind text, pool text)
LANGUAGE plpgsql AS $$
BEGIN
    IF jsonb_array_length(items) > 1 THEN
        PERFORM 1 FROM ai_marking_queue_live q
        WHERE q.queue_id IN (SELECT (x ->> 'queue_id')::uuid FROM jsonb_array_elements(items) x)
        ORDER BY q.queue_id FOR UPDATE;
        PERFORM 1 FROM submissions s
        WHERE s.id IN (SELECT q.submission_id FROM ai_marking_queue_live q
                       WHERE q.queue_id IN (SELECT (x ->> 'queue_id')::uuid
                                            FROM jsonb_array_elements(items) x))
        ORDER BY s.id FOR UPDATE;
    END IF;
    -- One statement: the items in their order, each settled when its row is read.
    RETURN QUERY
    SELECT x.queue_id, s.*
    FROM jsonb_to_recordset(items)
         AS x (queue_id uuid, dispatch_seq integer, result jsonb, usage jsonb)
    CROSS JOIN LATERAL aiqueue_settle(x.queue_id, x.result, x.usage, x.dispatch_seq,
                                      plan, p_taker) s;
END
$$;

-- A completed result, then the next claim, in one transaction.  The claim runs
-- whether or not the result was new: the gate decides whether a slot is free
-- (a late result's duplicate may find one).  Always exactly one row: `applied`,
-- and the claimed job's columns (NULL when nothing was claimed).  Locks: the
-- completion holds its row while the settle waits for the advisory lock
-- (aiqueue_result), whose holders never wait for a queue row (SKIP LOCKED);
-- plain claims, which no longer take it, wait for a counter row only while
-- they hold no row (43_fair_race), so this cannot deadlock.
-- A new result also raises the learned limit L (aiqueue_flow_result) before
-- the claim reads it.
--
-- A lost commit answer (docs/deploying/index.md): the result's dispatch line keeps the
-- row this settle claimed (next_queue_id, next_seq), and that row's line
-- says who took it to send it (taken_by: the caller's token, which it keeps
-- across its retries of one webhook).  When the same result comes again from
-- that caller (the answer was lost, and the store or the webhook retried) and
-- the row is still processing under that claim, it is handed back instead of
-- a second row being claimed: nothing is applied twice and no claimed row is
-- left without a dispatch.  Any other caller (a function repeating a webhook
-- whose answer it lost) never gets it: the first caller sends it.
-- The handed-back row was charged (turns, spend) by the settle that claimed it.
CREATE OR REPLACE FUNCTION aiqueue_settle(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                                          p_dispatch_seq integer, plan jsonb, p_taker uuid)
RETURNS TABLE (applied boolean, queue_id uuid, submission_id uuid, assignment_id text,
               attempts integer, dispatch_seq integer, payload text, content text,
               more boolean, breaker_dirty boolean, kind text, pool text)
LANGUAGE plpgsql AS $$
DECLARE
    done ai_marking_queue := aiqueue_result(p_queue_id, p_result, p_usage, p_dispatch_seq,
                                            plan);
BEGIN
    applied := done.queue_id IS NOT NULL;
    IF NOT applied THEN
        SELECT h.* INTO queue_id, submission_id, assignment_id, attempts, dispatch_seq,
                        payload, content, more, breaker_dirty, kind, pool
        FROM aiqueue_handback(p_queue_id, p_dispatch_seq, p_taker) h;
        IF FOUND THEN
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    -- Only the first settle's claim is the result's to hand back: a repeat's
    -- own claim is its caller's, and keeps the first one's link.  The claimed
    -- row's line names this row (handed_by), the link's other end.
    SELECT c.* INTO queue_id, submission_id, assignment_id, attempts, dispatch_seq,
                    payload, content, more, breaker_dirty, kind, pool
    FROM aiqueue_claim(plan, p_taker, CASE WHEN applied THEN p_queue_id END) c;
    IF FOUND AND applied THEN
        -- An attempt starts after its row was created: only the months since are
        -- looked at (the attempts are month partitions, 97_partitions.sql).
        UPDATE ai_marking_attempts a
        SET next_queue_id = aiqueue_settle.queue_id, next_seq = aiqueue_settle.dispatch_seq
        WHERE a.queue_id = p_queue_id AND a.dispatch_seq = p_dispatch_seq
          AND a.kind = 'dispatch'
          AND a.started_at >= aiqueue_months_from(done.created_at);
    END IF;
    RETURN NEXT;
END
$$;

-- A completed result, applied at most once (aiqueue_complete); when it was new,
-- what follows a result, given the completed row: its pool's L rises
-- (aiqueue_flow_result) and its usage corrects what its dispatch charged
-- (aiqueue_money_result).  The settle and a lone complete (queue.sql:
-- complete) both run this.  The claim lock from the end on (aiqueue 0023): the
-- outbox test takes it rather than pinning a row, and the counters, spend
-- windows and budget window written after are the claim's rows too, so they
-- are written under it, in the claim's order (see aiqueue_outbox_run_finished).
-- A settle without it where the plan has no money rules was measured and not
-- kept (docs/performance.md, "State tables", step 5): settles of one pool
-- queue on the rows they all write (its cache row, the estimate, the group's
-- counter) until their commits anyway, and without it a settle's claim meets
-- groups other settles hold, which it steps over.  Returns the completed row
-- (NULL when nothing was applied).
CREATE OR REPLACE FUNCTION aiqueue_result(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                                          p_dispatch_seq integer, plan jsonb)
RETURNS ai_marking_queue LANGUAGE plpgsql AS $$
DECLARE
    done ai_marking_queue;
BEGIN
    done := aiqueue_complete(p_queue_id, p_result, p_usage, p_dispatch_seq, plan -> 'money',
                             true);
    IF done.queue_id IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM aiqueue_hold(done, p_result);  -- a held result (86_holds)
    PERFORM aiqueue_claim_lock();
    PERFORM aiqueue_flow_result(done, p_dispatch_seq, plan);
    PERFORM aiqueue_money_result(done, p_dispatch_seq, plan -> 'money');
    RETURN done;
END
$$;

-- Apply a result at most once: the row lock plus the status test mean a second
-- (concurrent or later) delivery finds the row completed and changes nothing.
-- A late result of an earlier dispatch still completes a row that is not done.
-- One statement: the row, its submission and its attempt are written, the
-- usage stored priced (aiqueue_priced: the function's cost, else the pool's
-- prices in `money`), the review record of what the result replaced
-- (ai_marking_results) and the one counter delta (ai_marking_tally) inserted.
-- Then what follows the move (74_moved.sql), after the statement, so the run's
-- end reads the record; `p_locked`: the caller takes the claim lock right after
-- (aiqueue_result), so the run's end takes it rather than pinning a row.
-- Returns the completed row (NULL when nothing was applied): the caller's
-- after-result writes take it from there.
-- The row is read in the live table and its end moves it to its month (aiqueue
-- 0078), each statement naming the record's live part, so none of them locks
-- the months.  A late result of a row that failed for good (in its month) first
-- brings it back, as the processing row it was (`p_was`: failed;
-- aiqueue_failed_back in 95_recovery.sql).
CREATE OR REPLACE FUNCTION aiqueue_complete(p_queue_id uuid, p_result jsonb, p_usage jsonb,
                                            p_dispatch_seq integer, money jsonb DEFAULT NULL,
                                            p_locked boolean DEFAULT false,
                                            p_was text DEFAULT NULL)
RETURNS ai_marking_queue LANGUAGE plpgsql AS $$
DECLARE
    done ai_marking_queue;
    got record;
    was text[];
BEGIN
    WITH row AS (
        SELECT q.queue_id, q.submission_id, aiqueue_priced(p_usage, money, q.pool) AS usage,
               coalesce(p_was, q.status) AS was, q.dispatch_seq AS seq
        FROM ai_marking_queue_live q
        WHERE q.queue_id = p_queue_id
        FOR UPDATE
    ),
    -- What the result replaces.  The lock reads the newest committed mark (a
    -- revert that committed while we waited), which a revert must restore.
    prev AS (
        SELECT s.id, s.ai_result, s.ai_marked_at
        FROM submissions s JOIN row ON s.id = row.submission_id
        FOR UPDATE OF s
    ),
    -- Not under an older rubric (77_remark); asked here, where the row is still
    -- read in the live table (the record's function reads after its move).
    applies AS MATERIALIZED (SELECT aiqueue_result_applies(p_queue_id) AS yes),
    sub AS (
        UPDATE submissions s SET ai_result = p_result, ai_marked_at = now()
        FROM prev, applies WHERE s.id = prev.id AND applies.yes
        RETURNING s.id
    ),
    done AS (
        UPDATE ai_marking_queue q
        SET status = 'completed', finished_at = now(), last_error = NULL,
            usage = row.usage, updated_at = now(), queue_moves = q.queue_moves + 1
        FROM row, prev
        WHERE q.queue_id = row.queue_id
          AND q.status IN ('pending', 'processing')  -- the live part alone (aiqueue 0078)
        RETURNING q.*
    ),
    -- The row's slot is free (ai_marking_claimed), unless this is a late result
    -- of an earlier dispatch: the current one is still at the function, which
    -- keeps the slot until it reports or its lease runs out (else the function
    -- would get one job over the cap).
    free AS (
        DELETE FROM ai_marking_claimed c
        USING row
        WHERE c.queue_id = row.queue_id
          AND NOT (row.was = 'processing' AND row.seq <> p_dispatch_seq)
          AND EXISTS (SELECT 1 FROM done)
    ),
    history AS (
        UPDATE ai_marking_attempts a
        SET ended_at = now(), usage = d.usage,
            outcome = CASE WHEN a.ended_at IS NULL THEN 'completed' ELSE 'completed_late' END
        FROM done d
        WHERE a.queue_id = d.queue_id AND a.dispatch_seq = p_dispatch_seq
          AND a.kind = 'dispatch' AND a.started_at >= aiqueue_months_from(d.created_at)
        RETURNING a.outcome
    ),
    record AS (SELECT aiqueue_complete_record(d, p_result, prev.ai_result, prev.ai_marked_at,
                                              (SELECT h.outcome FROM history h LIMIT 1),
                                              applies.yes)
               FROM done d JOIN prev ON prev.id = d.submission_id, applies)
    SELECT d::ai_marking_queue AS row, row.was INTO got FROM done d, row, record;
    IF NOT FOUND THEN
        IF p_was IS NULL AND aiqueue_failed_back(p_queue_id) THEN
            RETURN aiqueue_complete(p_queue_id, p_result, p_usage, p_dispatch_seq, money,
                                    p_locked, 'failed');
        END IF;
        -- The current dispatch of a row a late result completed: free its slot.
        PERFORM aiqueue_late_slot_free(p_queue_id, p_dispatch_seq);
        RETURN done;
    END IF;
    done := got.row;
    was := ARRAY[got.was];
    -- What follows: its live event (with its score) and count deltas, its run's
    -- calibration gate, its same-answer followers, then the run's end.
    PERFORM aiqueue_feed_moved(ARRAY[done]);
    PERFORM aiqueue_counts_moved(ARRAY[done], was);
    IF done.calibration THEN
        PERFORM aiqueue_calibration_moved(ARRAY[done], was);
    END IF;
    IF done.answer_key IS NOT NULL AND done.leader_id IS NULL THEN
        PERFORM aiqueue_group_done(done.queue_id, p_locked);
    END IF;
    PERFORM aiqueue_outbox_moved(ARRAY[done], was, p_locked);
    RETURN done;
END
$$;
