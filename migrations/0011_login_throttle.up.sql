-- aiqueue 0011: the /ai-queue login throttle lives in the database, so every
-- instance (serverless ones too) counts the same failures.  One row per failed
-- login; rows older than the window are pruned when the next failure is written
-- (db/sql/security.sql: login_failed).
CREATE TABLE ai_queue_login_failures (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    client text NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ai_queue_login_failures_client_idx ON ai_queue_login_failures (client, failed_at);
CREATE INDEX ai_queue_login_failures_failed_idx ON ai_queue_login_failures (failed_at);
