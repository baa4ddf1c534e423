-- Alerts: opened and resolved in SQL (functions/99_alerts.sql), read here.

-- evaluate_alerts --
-- Open and resolve alerts (aiqueue_alerts_evaluate, functions/99_alerts.sql); $1 the
-- moment (NULL: now()), then the thresholds.
SELECT * FROM aiqueue_alerts_evaluate($1::timestamptz, $2::float8, $3::float8, $4::integer,
                                      $5::float8, $6::float8);

-- open_alerts --
-- The open alerts, for /ai-queue (oldest first).
SELECT alert, pool, kind, value, threshold, opened_at
FROM ai_queue_alerts WHERE resolved_at IS NULL
ORDER BY opened_at, id;
