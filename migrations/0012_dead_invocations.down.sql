ALTER TABLE ai_marking_attempts DROP COLUMN IF EXISTS look_after,
                                DROP COLUMN IF EXISTS platform;
