-- No trigger follows aiqueue's own status changes of ai_marking_queue: the
-- functions that move a row call what follows the move themselves
-- (functions/74_moved.sql), so the six AFTER UPDATE OF status triggers go.  No
-- row's state changes: the feed, the counts, the outbox, the groups,
-- calibration and the turns are written exactly as the triggers wrote them.
--
-- `queue_moves` counts the moves aiqueue's functions made of a row (each bumps it in
-- the statement that changes `status`).  A status change that leaves it alone
-- was made by host SQL or an operator by hand: one row trigger, filtered by
-- WHEN so that aiqueue's own moves never call it, follows that change as the
-- old triggers did (74_moved.sql, ai_marking_queue_host_moved).  Adding a
-- column with a constant default rewrites nothing.
--
-- The statement triggers on INSERT and DELETE stay (host SQL may insert and
-- delete rows), and so do the one on a sooner run_after (40_fair.sql says why)
-- and the ready table's (35_ready.sql).
ALTER TABLE ai_marking_queue ADD COLUMN queue_moves integer NOT NULL DEFAULT 0;
DROP TRIGGER IF EXISTS ai_marking_queue_events_upd ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_outbox ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_group_done ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_group_left ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_calibration ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_fair_upd ON ai_marking_queue;
