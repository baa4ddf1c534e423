ALTER TABLE ai_queue_control DROP COLUMN IF EXISTS cron_called_at;
