ALTER TABLE ai_queue_control DROP COLUMN IF EXISTS last_partitions_at;
