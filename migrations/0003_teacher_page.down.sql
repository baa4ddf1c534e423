-- aiqueue 0002 down.
DROP INDEX IF EXISTS ai_marking_events_cursor_idx;
DROP TABLE IF EXISTS ai_marking_assignments;
