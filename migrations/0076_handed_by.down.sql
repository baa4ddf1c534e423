-- Rolling back drops every aiqueue_* function first; the previous version's
-- functions folder claims without naming the handing row.
ALTER TABLE ai_marking_attempts DROP COLUMN IF EXISTS handed_by;
