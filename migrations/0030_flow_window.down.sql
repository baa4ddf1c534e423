ALTER TABLE ai_queue_control DROP COLUMN IF EXISTS limit_raised_at,
    DROP COLUMN IF EXISTS learned_window;
