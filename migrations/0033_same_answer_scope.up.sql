-- The same answer, kept to its own group and lane (docs/same-answer.md).
--
-- A row follows only a leader of the same group, lane, pool, kind, payload
-- and answer key that can run now.  The enqueue probes each of its own keys
-- in its group: the leaders' index is keyed by the answer first, then the
-- group (an enqueue no longer reads, or locks, every live leader of a payload).
DROP INDEX IF EXISTS ai_marking_queue_answer_idx;
CREATE INDEX ai_marking_queue_answer_idx
    ON ai_marking_queue (answer_key, (coalesce(group_key, assignment_id)))
    WHERE answer_key IS NOT NULL AND leader_id IS NULL
      AND status IN ('pending', 'processing');

-- Followers that joined a leader of another group or lane, or one held (by a
-- not_before still ahead, or its run's calibration), are marked on their own.
UPDATE ai_marking_queue f
SET leader_id = NULL, run_after = greatest(now(), f.not_before), updated_at = now()
FROM ai_marking_queue l
WHERE f.leader_id = l.queue_id AND f.status = 'pending' AND f.run_after = 'infinity'
  AND (coalesce(f.group_key, f.assignment_id) <> coalesce(l.group_key, l.assignment_id)
       OR f.lane <> l.lane OR l.held_run_after IS NOT NULL OR l.not_before > now());
