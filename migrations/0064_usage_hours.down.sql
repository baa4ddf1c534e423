DROP TABLE IF EXISTS ai_marking_usage_hours;
