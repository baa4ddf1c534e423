ALTER TABLE ai_marking_attempts
    DROP COLUMN IF EXISTS taken_by;
