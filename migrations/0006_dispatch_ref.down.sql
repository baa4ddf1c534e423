ALTER TABLE ai_marking_attempts DROP COLUMN IF EXISTS dispatch_ref;
