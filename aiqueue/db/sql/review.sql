-- Review of applied results (aiqueue/queue/review.py).  The writes are functions
-- (db/sql/functions/85_review.sql): each takes the submission's lock in the order the
-- result's application does.

-- accept --
SELECT outcome, accepted_at AS at FROM aiqueue_accept($1::uuid, $2::text, $3::jsonb);

-- revert --
SELECT outcome, reverted_at AS at FROM aiqueue_revert($1::uuid, $2::text);

-- review_run --
-- Every unreviewed result of the assignment's latest run, one transaction.
SELECT done, superseded FROM aiqueue_review_run($1::text, $2::text, $3::text);

-- result_history --
-- A submission's results, newest first (`applied` false: made under an older
-- payload than the mark it found, recorded and never applied: docs/remark.md).
SELECT queue_id, applied_at, result::text AS result, review, accepted_at, reverted_at, actor,
       adjusted_result::text AS adjusted_result, payload_version, applied
FROM ai_marking_results
WHERE submission_id = $1
ORDER BY seq DESC
LIMIT $2;

-- review_of --
-- The review of one row's applied result (the /ai-queue row page: no result).
SELECT review, accepted_at, reverted_at, actor, applied_at
FROM ai_marking_results WHERE queue_id = $1;

-- submission_exists --
SELECT EXISTS (SELECT 1 FROM submissions WHERE id = $1) AS found;
