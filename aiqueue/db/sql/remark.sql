-- A rubric changes: re-mark what it changed (docs/remark.md).  The rule that
-- calls these: aiqueue/queue/remark.py; its transaction: aiqueue/db/remark.py.
-- The settle's side (a result under an older payload is recorded, not applied)
-- and the run's end are functions/77_remark.sql.

-- remark_lock --
-- Two re-marks of one assignment take turns: the second sees the first's rows
-- (and supersedes them).  The key is the assignment's, in a space of its own.
SELECT pg_advisory_xact_lock(hashtextextended('aiqueue remark ' || $1::text, 0));

-- remark_plan --
-- What a re-mark of assignment $1 under payload $2 (JSON text) does to each of
-- its submissions ($4: only these ids; NULL: all), each one of:
--   unchanged      its applied mark was made under $2, or a row under $2 is live;
--   unmarked       no mark and no live row: Mark All's to do, not a re-mark's;
--   reviewed_kept  a teacher accepted (or adjusted) its mark; kept unless $3;
--   remark         everything else: marked under another payload (or a mark the
--                  queue has no record of), or live under another payload.
-- The applied mark is the newest applied result not reverted.
WITH target AS MATERIALIZED (
    SELECT aiqueue_payload_id($2::jsonb) AS pid,
           CASE WHEN $2::jsonb <> '{}'::jsonb
                THEN encode(sha256(convert_to($2::jsonb::text, 'UTF8')), 'hex') END AS version
),
subs AS MATERIALIZED (
    SELECT s.id, s.ai_marked_at IS NOT NULL AS marked, cur.payload_version, cur.review,
           cur.queue_id IS NOT NULL AS known
    FROM submissions s
    LEFT JOIN LATERAL (
        SELECT m.queue_id, m.payload_version, m.review FROM ai_marking_results m
        WHERE m.submission_id = s.id AND m.applied AND m.review <> 'reverted'
        ORDER BY m.seq DESC LIMIT 1) cur ON true
    WHERE s.assignment_id = $1::text AND ($4::uuid[] IS NULL OR s.id = ANY ($4::uuid[]))
),
live AS MATERIALIZED (
    SELECT q.submission_id,
           bool_or(q.payload_id IS NOT DISTINCT FROM t.pid) AS current,
           bool_or(q.payload_id IS DISTINCT FROM t.pid) AS other
    FROM ai_marking_queue q CROSS JOIN target t
    WHERE q.submission_id IN (SELECT id FROM subs) AND q.phase = 'live'
    GROUP BY q.submission_id
)
SELECT x.id,
       CASE WHEN coalesce(l.current, false) THEN 'unchanged'
            WHEN x.marked AND x.known AND x.payload_version IS NOT DISTINCT FROM t.version
                 AND NOT coalesce(l.other, false) THEN 'unchanged'
            WHEN NOT x.marked AND NOT coalesce(l.other, false) THEN 'unmarked'
            WHEN x.review = 'accepted' AND NOT $3::boolean THEN 'reviewed_kept'
            ELSE 'remark' END AS plan
FROM subs x CROSS JOIN target t LEFT JOIN live l ON l.submission_id = x.id
ORDER BY x.id;

-- remark_defaults --
-- What a re-mark's rows of assignment $1 take from its newest row: its kind,
-- group and priority (no row: none, and the enqueue's defaults hold).
SELECT q.kind, q.group_key, q.priority FROM ai_marking_queue q
WHERE q.assignment_id = $1::text ORDER BY q.created_at DESC LIMIT 1;

-- remark_supersede --
-- Debounce: the rows of assignment $1 not yet dispatched (pending) that were
-- enqueued within the last $3 seconds under another payload than $2 (an earlier
-- re-mark's, or a Mark All's) end cancelled, last_error "superseded", using no
-- attempt; $4: only these submissions (NULL: all); $5 the actor.  Run after the
-- re-mark's own rows are in, so they join the same run and the run does not end
-- here.  A group whose last turns went continues where its live rows end (as
-- cancel_pending does).
WITH row AS (
    UPDATE ai_marking_queue q
    SET status = 'cancelled', last_error = 'superseded', finished_at = now(),
        updated_at = now(), queue_moves = q.queue_moves + 1
    WHERE q.assignment_id = $1::text AND q.status = 'pending'
      AND q.created_at >= now() - make_interval(secs => $3::float8)
      AND q.payload_id IS DISTINCT FROM aiqueue_payload_id($2::jsonb)
      AND ($4::uuid[] IS NULL OR q.submission_id = ANY ($4::uuid[]))
    RETURNING q.queue_id, q.pool, q.priority, coalesce(q.group_key, q.assignment_id) AS group_key,
              q.turn, q AS moved
),
history AS (
    INSERT INTO ai_marking_attempts (queue_id, kind, outcome, error, ended_at, actor)
    SELECT queue_id, 'action', 'cancel', 'superseded', now(), $5::text FROM row
),
-- What follows the move (functions/74_moved.sql).
followed AS (
    SELECT aiqueue_moved(array_agg(row.moved), array_fill('pending'::text, ARRAY[count(*)::int]))
    FROM row
),
-- A group whose last turns were cancelled continues where its live rows end
-- (40_fair.sql); one row, joined below so that it runs.
regroup AS (
    SELECT aiqueue_turns_cancelled(array_agg(pool), array_agg(priority),
                                   array_agg(group_key), array_agg(turn))
    FROM row
)
SELECT count(*) AS n FROM row CROSS JOIN regroup CROSS JOIN followed;

-- remark_record --
-- The re-mark, kept: payload $2 is assignment $1's current one from now on (the
-- teacher page's saved payload too, when the page has the assignment).  The
-- payload is stored as the enqueue stores it, even when no row was added.
WITH payload AS (
    INSERT INTO ai_marking_payloads AS p (sha256, payload)
    SELECT sha256(convert_to(x.doc::text, 'UTF8')), x.doc
    FROM (SELECT $2::jsonb AS doc) x WHERE x.doc <> '{}'::jsonb
    ON CONFLICT (sha256) DO UPDATE
    SET first_used_at = least(p.first_used_at, now()),
        last_used_at = greatest(p.last_used_at, now())
    RETURNING p.id, encode(p.sha256, 'hex') AS version
),
record AS (
    INSERT INTO ai_marking_remarks (assignment_id, payload_id, payload_version, run_id,
                                    enqueued, superseded, actor)
    VALUES ($1::text, (SELECT id FROM payload), (SELECT version FROM payload),
            $3::uuid, $4::integer, $5::integer, $6::text)
    RETURNING id
)
UPDATE ai_marking_assignments a SET payload = $2::jsonb, updated_at = now()
FROM record
WHERE a.assignment_id = $1::text AND a.payload IS DISTINCT FROM $2::jsonb;

-- row_payload_version --
-- The version of the payload row $1 is marked under (NULL: the empty payload).
SELECT aiqueue_payload_version(q.payload_id) FROM ai_marking_queue q WHERE q.queue_id = $1;

-- current_payload --
-- Assignment $1's current payload (JSON text; NULL: none known): its newest
-- re-mark's, else its newest row's.
SELECT coalesce(
    (SELECT p.payload FROM ai_marking_remarks r JOIN ai_marking_payloads p ON p.id = r.payload_id
     WHERE r.assignment_id = $1::text ORDER BY r.id DESC LIMIT 1),
    (SELECT p.payload FROM ai_marking_queue q JOIN ai_marking_payloads p ON p.id = q.payload_id
     WHERE q.assignment_id = $1::text ORDER BY q.created_at DESC LIMIT 1))::text AS payload;
