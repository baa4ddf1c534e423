-- aiqueue 0016: when the cron last called (docs/deploying/index.md), so the doctor can warn
-- when it has not called for 3 periods (a Hobby plan's cron runs at most daily;
-- a wrong CRON_SECRET or a missing vercel.json entry means it never calls).
ALTER TABLE ai_queue_control ADD COLUMN cron_called_at timestamptz;
