-- A declared budget's window (docs/concepts.md): a row's estimate, when the window
-- has room for it, what it holds, and its count per second.
--
-- The window: one entry per dispatch in ai_marking_budget (the claim writes it
-- with the row's estimate, the result's usage replaces that, a refusal sets
-- it to 0), and each second of a pool's entries summed up in
-- ai_marking_budget_seconds (aiqueue 0031), which a trigger keeps in step.
-- The claim's check reads the seconds, at most one row per second of the
-- window whatever the throughput, and walks the entries only when they say
-- the window may be full.
--
-- The claim's two (estimate, opens_at) are plpgsql, not SQL: a SQL function
-- that cannot be inlined is planned again in each transaction that calls it,
-- a plpgsql one keeps its plans.

-- A row's estimated tokens: what the latest rows of its assignment used in its
-- pool (the mean of the last 20 reported), else of any assignment of the pool,
-- else 1000.  Its plan is the generic one: the walk back along
-- ai_marking_budget_estimate_idx whatever the statistics say (stepping over
-- the entries still in flight: the index holds every entry, aiqueue 0032),
-- where custom plans (chosen when a new table's plans looked cheaper) are
-- planned again on every call.
CREATE OR REPLACE FUNCTION aiqueue_budget_estimate(p_assignment_id text,
                                                   p_pool text DEFAULT 'default')
RETURNS bigint LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN coalesce(
        (SELECT round(avg(x.tokens))::bigint FROM (
             SELECT b.tokens FROM ai_marking_budget b
             WHERE b.actual AND b.assignment_id = p_assignment_id AND b.pool = p_pool
             ORDER BY b.at DESC LIMIT 20) x),
        (SELECT round(avg(x.tokens))::bigint FROM (
             SELECT b.tokens FROM ai_marking_budget b
             WHERE b.actual AND b.pool = p_pool ORDER BY b.at DESC LIMIT 20) x),
        1000);
END
$$;

-- When a pool's budget window has room for `est` more tokens and one more
-- request: now() or earlier when it has, else the moment enough of its entries
-- age out.  The window holds at most rate × W / 60 over any W seconds
-- (docs/concepts.md).  A row larger than the whole budget waits for an empty
-- window, not forever.
-- The window's seconds answer first: they never hold less than its entries
-- (aiqueue_budget_count), and an entry's tokens are never negative, so when
-- all of them fit with `est` every newer part of the window does too, and the
-- window has room ('-infinity', as the walk below says when nothing must
-- leave).  Otherwise the entries are walked newest first: the first one whose
-- running sum (with est) no longer fits is the newest that must leave, at its
-- time + W.
CREATE OR REPLACE FUNCTION aiqueue_budget_opens_at(tpm integer, rpm integer, budget_window float8,
                                                   est bigint, p_pool text DEFAULT 'default')
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
DECLARE
    most_tokens float8 := floor(tpm * budget_window / 60);
    most_requests float8 := greatest(floor(rpm * budget_window / 60), 1);
    held record;
BEGIN
    -- A second's row holds the entries of [starts_at, starts_at + 1 s).
    SELECT coalesce(sum(s.tokens), 0) AS tokens, coalesce(sum(s.requests), 0) AS requests
    INTO held
    FROM ai_marking_budget_seconds s
    WHERE s.pool = p_pool
      AND s.starts_at > now() - make_interval(secs => budget_window) - interval '1 second';
    IF budget_window IS NOT NULL
       AND (tpm <= 0 OR held.tokens + least(est, most_tokens) <= most_tokens)
       AND (rpm <= 0 OR held.requests + 1 <= most_requests) THEN
        RETURN '-infinity';
    END IF;
    RETURN (
        WITH w AS (
            SELECT b.at,
                   sum(b.tokens) OVER newest AS tokens,
                   count(*) OVER newest AS requests
            FROM ai_marking_budget b
            WHERE b.pool = p_pool AND b.at > now() - make_interval(secs => budget_window)
            WINDOW newest AS (ORDER BY b.at DESC, b.queue_id, b.dispatch_seq)
        )
        SELECT coalesce(max(w.at), '-infinity') + make_interval(secs => budget_window)
        FROM w
        WHERE (tpm > 0 AND w.tokens + least(est, most_tokens) > most_tokens)
           OR (rpm > 0 AND w.requests + 1 > most_requests));
END
$$;

-- Whether a pool's window has room for its first due row of `kinds` (in
-- dispatch order, the row its claim would most likely take): that row's
-- estimate (`est`, which the claim writes to the window) and when the window
-- opens for it (`opens_at`).  The first due row is the walk of
-- ai_marking_ready_claim_idx in its order, stopping at the first row of
-- `kinds` that is due: with sorts off, the planner cannot read and sort every
-- pending row instead (which it chose on statistics taken when the table was
-- small, and which grew with the backlog: 14 us to 900 us per settle).
CREATE OR REPLACE FUNCTION aiqueue_budget_room(tpm integer, rpm integer, budget_window float8,
                                               kinds text[], p_pool text,
                                               OUT est bigint, OUT opens_at timestamptz)
LANGUAGE plpgsql STABLE SET enable_sort = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    est := aiqueue_budget_estimate((
        SELECT q.assignment_id FROM ai_marking_queue_live q
        WHERE q.queue_id = (SELECT o.queue_id FROM ai_marking_ready o
                            WHERE o.run_after <= now() AND o.kind = ANY (kinds)
                            ORDER BY -o.priority, o.turn, o.seq LIMIT 1)), p_pool);
    opens_at := aiqueue_budget_opens_at(tpm, rpm, budget_window, est, p_pool);
END
$$;

-- What a pool's budget window holds now (stats, /ai-queue): its entries, exactly.
CREATE OR REPLACE FUNCTION aiqueue_budget_use(budget_window float8, p_pool text DEFAULT 'default',
                                              OUT tokens bigint, OUT requests bigint)
LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(b.tokens), 0)::bigint, count(*)
    FROM ai_marking_budget b
    WHERE b.pool = p_pool AND b.at > now() - make_interval(secs => budget_window)
$$;

-- The window's seconds follow its entries: an entry counts its tokens (never
-- below 0) and one request in the second its `at` falls in, and a change
-- moves its count.  A deleted entry stays counted, for at most a window: the
-- claim's prune is a day past any window, and an erasure's delete holds no
-- claim lock, while every other write of an entry does (the claim's, a
-- result's, a refusal's), so no one waits for a second's row.  A second's
-- first entry forgets the pool's seconds of over a day ago.
CREATE OR REPLACE FUNCTION aiqueue_budget_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    new_second timestamptz := date_trunc('second', NEW.at);
    add_tokens bigint := greatest(NEW.tokens, 0);
    add_requests integer := 1;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.pool = NEW.pool AND date_trunc('second', OLD.at) = new_second
    THEN
        add_tokens := add_tokens - greatest(OLD.tokens, 0);
        add_requests := 0;
    ELSIF TG_OP = 'UPDATE' THEN
        UPDATE ai_marking_budget_seconds s
        SET tokens = s.tokens - greatest(OLD.tokens, 0), requests = s.requests - 1
        WHERE s.pool = OLD.pool AND s.starts_at = date_trunc('second', OLD.at);
    END IF;
    UPDATE ai_marking_budget_seconds s
    SET tokens = s.tokens + add_tokens, requests = s.requests + add_requests
    WHERE s.pool = NEW.pool AND s.starts_at = new_second;
    IF NOT FOUND THEN
        INSERT INTO ai_marking_budget_seconds AS s (pool, starts_at, tokens, requests)
        VALUES (NEW.pool, new_second, add_tokens, add_requests)
        ON CONFLICT (pool, starts_at) DO UPDATE
        SET tokens = s.tokens + EXCLUDED.tokens, requests = s.requests + EXCLUDED.requests;
        DELETE FROM ai_marking_budget_seconds s
        WHERE s.pool = NEW.pool AND s.starts_at < now() - interval '1 day';
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER ai_marking_budget_count_ins
AFTER INSERT ON ai_marking_budget
FOR EACH ROW EXECUTE FUNCTION aiqueue_budget_count();

CREATE OR REPLACE TRIGGER ai_marking_budget_count_upd
AFTER UPDATE OF tokens, at, pool ON ai_marking_budget
FOR EACH ROW
WHEN (OLD.tokens IS DISTINCT FROM NEW.tokens OR OLD.at IS DISTINCT FROM NEW.at
      OR OLD.pool IS DISTINCT FROM NEW.pool)
EXECUTE FUNCTION aiqueue_budget_count();
