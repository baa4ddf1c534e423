-- Rolling back drops every aiqueue_* function (and its triggers) first; the
-- previous version's functions folder creates its status triggers again.  The
-- host moves' trigger names `queue_moves`, so it goes before the column does.
DROP TRIGGER IF EXISTS ai_marking_queue_host_moved ON ai_marking_queue;
ALTER TABLE ai_marking_queue DROP COLUMN IF EXISTS queue_moves;
