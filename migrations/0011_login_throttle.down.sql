DROP TABLE IF EXISTS ai_queue_login_failures;
