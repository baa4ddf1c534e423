-- No trigger follows a status change of ai_marking_queue: the functions that
-- move a row call what follows the move themselves (functions/74_moved.sql), so
-- the six AFTER UPDATE OF status triggers go.  No row's state changes: the
-- feed, the counts, the outbox, the groups, calibration and the turns are
-- written exactly as the triggers wrote them.  The statement triggers on
-- INSERT and DELETE stay (host SQL may insert and delete rows), and so does
-- the one on a sooner run_after (40_fair.sql says why).
DROP TRIGGER IF EXISTS ai_marking_queue_events_upd ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_outbox ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_group_done ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_group_left ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_calibration ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_fair_upd ON ai_marking_queue;
