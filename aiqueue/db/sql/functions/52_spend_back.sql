-- A charge given back (a refusal, a row leaving a batch), and when a paused group goes on.

-- What a dispatch (or a pack) charged a group is given back: its turn counter,
-- and its spend windows when money was charged. Counter and spend windows are
-- the claim's rows too: a caller that gives money back holds the claim's lock
-- first, so they are locked in its order (aiqueue 0023).  The rows are looked
-- for in the live part first (the record named with its key written out), and
-- in the months of ended rows only for one that is not there (a refusal given
-- up has failed it), so a refusal or a batch's refund locks no month
-- otherwise (aiqueue 0078); aiqueue_money_refund reads its row the same way.
CREATE OR REPLACE FUNCTION aiqueue_uncharge(p_pool text, p_priority integer, p_group text,
                                            p_tokens float8, p_usd float8,
                                            p_charged_at timestamptz, p_ids uuid[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    UPDATE ai_marking_fair f
    SET counter = f.counter - p_tokens,
        (walk_key, walk_turn, walk_seq) = (
            SELECT k.* FROM aiqueue_fair_key(f, f.waiting, f.counter - p_tokens, f.head_turn,
                                             f.head_seq) k)
    WHERE f.pool = p_pool AND f.priority = p_priority AND f.group_key = p_group;
    IF p_usd IS NOT NULL THEN
        PERFORM aiqueue_spend_correct(p_pool, p_group, -p_usd, p_charged_at);
        UPDATE ai_marking_fair f SET capped_until = NULL, capped_by = NULL
        WHERE f.pool = p_pool AND f.group_key = p_group AND f.capped_until IS NOT NULL;
    END IF;
    UPDATE ai_marking_queue q SET charged_tokens = NULL, charged_usd = NULL
    WHERE q.queue_id = ANY (p_ids)
      AND q.status IN ('pending', 'processing');  -- the live part alone
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n < cardinality(p_ids) THEN
        UPDATE ai_marking_queue q SET charged_tokens = NULL, charged_usd = NULL
        WHERE q.queue_id = ANY (p_ids)
          AND NOT (q.status IN ('pending', 'processing'));  -- the ended months alone
    END IF;
END
$$;

-- A refused dispatch used no tokens: its charge is given back.
CREATE OR REPLACE FUNCTION aiqueue_money_refund(p_queue_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    SELECT q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS grp,
           q.charged_tokens, q.charged_usd, q.charged_at
    INTO r FROM ai_marking_queue q
    WHERE q.queue_id = p_queue_id AND q.status IN ('pending', 'processing');
    IF NOT FOUND THEN  -- a refusal given up: the row failed
        SELECT q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS grp,
               q.charged_tokens, q.charged_usd, q.charged_at
        INTO r FROM ai_marking_queue q
        WHERE q.queue_id = p_queue_id AND NOT (q.status IN ('pending', 'processing'));
    END IF;
    IF NOT FOUND OR r.charged_tokens IS NULL THEN
        RETURN;
    END IF;
    IF r.charged_usd IS NOT NULL THEN
        PERFORM aiqueue_claim_lock();
    END IF;
    PERFORM aiqueue_uncharge(r.pool, r.priority, r.grp, r.charged_tokens, r.charged_usd,
                             r.charged_at, ARRAY[p_queue_id]);
END
$$;

-- When a pending row of a group at a spend cap goes on (NULL: it is not paused).
CREATE OR REPLACE FUNCTION aiqueue_spend_resumes_at(p_status text, p_pool text,
                                                    p_priority integer, p_group text)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT f.capped_until FROM ai_marking_fair f
    WHERE p_status = 'pending' AND f.pool = p_pool AND f.priority = p_priority
      AND f.group_key = p_group AND f.capped_until > now()
$$;

-- The same, with the cap that paused it (the pages say which window).
CREATE OR REPLACE FUNCTION aiqueue_spend_pause(p_status text, p_pool text, p_priority integer,
                                               p_group text, OUT until timestamptz,
                                               OUT cap text)
LANGUAGE sql STABLE AS $$
    SELECT f.capped_until, f.capped_by FROM ai_marking_fair f
    WHERE p_status = 'pending' AND f.pool = p_pool AND f.priority = p_priority
      AND f.group_key = p_group AND f.capped_until > now()
$$;
