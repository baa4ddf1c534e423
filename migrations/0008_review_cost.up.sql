-- aiqueue 0008: review (accept / revert) of applied results, and usage counters.
--
-- ai_marking_results keeps every applied result with what it replaced on the
-- submission, so a teacher can accept it (optionally with an adjusted result
-- kept beside the AI's) or revert it.  It outlives queue-row pruning (no
-- foreign key to the queue) and carries the result's usage, which is what
-- GET /api/marking/usage adds up per day, assignment, group or model.
-- ai_marking_tally holds the /metrics counters as appended deltas (one row per
-- ended attempt, folded by the prune), so they never go down when queue rows
-- are pruned.  The statements that write both: db/sql/functions.sql and
-- sql/queries.sql.

CREATE TABLE ai_marking_results (
    -- A row's result is applied at most once: one record per queue row.
    queue_id uuid PRIMARY KEY,
    -- Orders the results of one submission ("superseded" = a later one applied).
    seq bigint GENERATED ALWAYS AS IDENTITY,
    submission_id uuid NOT NULL REFERENCES submissions (id) ON DELETE CASCADE,
    assignment_id text NOT NULL,
    run_id uuid NOT NULL,
    -- the fair-turns group (ai_marking_queue.group_key; NULL: the assignment)
    "group" text,
    applied_at timestamptz NOT NULL DEFAULT now(),
    result jsonb NOT NULL,
    previous_result jsonb,
    previous_marked_at timestamptz,
    review text NOT NULL DEFAULT 'unreviewed'
        CHECK (review IN ('unreviewed', 'accepted', 'reverted')),
    accepted_at timestamptz,
    reverted_at timestamptz,
    actor text,
    adjusted_result jsonb,
    model text,
    prompt_tokens bigint,
    completion_tokens bigint,
    cost_usd numeric,
    processing_seconds float8
);
CREATE INDEX ai_marking_results_submission_idx ON ai_marking_results (submission_id, seq);
CREATE INDEX ai_marking_results_run_idx ON ai_marking_results (run_id);
-- Results arrive in time order: usage ranges read a BRIN index that costs next
-- to nothing per insert.
CREATE INDEX ai_marking_results_applied_idx ON ai_marking_results USING brin (applied_at);

-- The latest result of each submission that has one, as far as the queue
-- still remembers it; what it replaced is unknown (reverting it clears the mark).
INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, run_id, "group",
                                applied_at, result, model, prompt_tokens, completion_tokens,
                                processing_seconds)
SELECT DISTINCT ON (q.submission_id) q.queue_id, q.submission_id, q.assignment_id, q.run_id,
       q.group_key, coalesce(s.ai_marked_at, q.finished_at), s.ai_result, q.usage ->> 'model',
       (q.usage ->> 'prompt_tokens')::numeric::bigint,
       (q.usage ->> 'completion_tokens')::numeric::bigint,
       date_part('epoch', q.finished_at - q.started_at)
FROM ai_marking_queue q JOIN submissions s ON s.id = q.submission_id
WHERE q.status = 'completed' AND s.ai_result IS NOT NULL
ORDER BY q.submission_id, q.finished_at DESC;

-- Counters as deltas: appended, never updated in place (no row lock for
-- concurrent webhooks to queue on), folded once a minute by the prune.
CREATE TABLE ai_marking_tally (
    outcome text NOT NULL,          -- how the attempt ended
    job text,                       -- 'completed' / 'failed' when it also ended the job
    error text,                     -- the content-free code of a failure
    model text,
    le float8,                      -- the processing-time bucket of a completed job
    n bigint NOT NULL DEFAULT 1,
    prompt_tokens bigint NOT NULL DEFAULT 0,
    completion_tokens bigint NOT NULL DEFAULT 0,
    cost_usd numeric NOT NULL DEFAULT 0,
    seconds float8 NOT NULL DEFAULT 0
);

-- Start the counters from the history the queue still holds.
INSERT INTO ai_marking_tally (outcome, job, error, model, n, prompt_tokens, completion_tokens)
SELECT a.outcome,
       CASE WHEN a.outcome IN ('completed', 'completed_late') THEN 'completed'
            WHEN q.status = 'failed' AND a.dispatch_seq = q.dispatch_seq THEN 'failed' END,
       a.error, a.usage ->> 'model', count(*),
       coalesce(sum((a.usage ->> 'prompt_tokens')::numeric), 0)::bigint,
       coalesce(sum((a.usage ->> 'completion_tokens')::numeric), 0)::bigint
FROM ai_marking_attempts a JOIN ai_marking_queue q ON q.queue_id = a.queue_id
WHERE a.kind = 'dispatch' AND a.outcome IS NOT NULL
GROUP BY 1, 2, 3, 4;
