-- Before migration 0050 (aiqueue/db/migrate.py prepare): prove, under a weak
-- lock, that every row of attempts, results and events is older than the bound
-- the upgrade attaches them below, so that its ATTACH reads no row while it
-- holds the tables (docs/performance.md, "A year of a district").
--
-- The bound is the start of next month (UTC), or of the month after when next
-- month starts within a day: a new row must pass the check until the upgrade
-- follows, seconds later.  Each constraint carries its bound in its name
-- (`<table>_before_YYYYMM`), which the upgrade reads and then drops.

-- step --
-- A constraint whose bound is a day away or past (a run that never finished) goes.
SELECT format('ALTER TABLE %I DROP CONSTRAINT %I', c.relname, k.conname) AS statement
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND c.relname IN ('ai_marking_attempts', 'ai_marking_results', 'ai_marking_events')
  AND k.contype = 'c'
  AND CASE WHEN k.conname ~ ('^' || c.relname || '_before_[0-9]{6}$')
           THEN to_date(right(k.conname, 6), 'YYYYMM')::timestamp
                <= now() AT TIME ZONE 'UTC' + interval '1 day' END

-- step --
-- The check, NOT VALID: new rows are checked from now on, old ones not yet
-- (a moment's ACCESS EXCLUSIVE lock, no scan).  Only a plain table (before the
-- upgrade) with its time column.
SELECT format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (%I IS NOT NULL AND %I < %L) NOT VALID',
              v.name, v.name || '_before_' || to_char(b.bound, 'YYYYMM'), v.key, v.key,
              b.bound AT TIME ZONE 'UTC') AS statement
FROM (VALUES ('ai_marking_attempts', 'started_at'), ('ai_marking_results', 'applied_at'),
             ('ai_marking_events', 'created_at')) AS v (name, key)
JOIN pg_class c ON c.relname = v.name AND c.relnamespace = current_schema()::regnamespace
               AND c.relkind = 'r'
CROSS JOIN (SELECT date_trunc('month', now() AT TIME ZONE 'UTC' + interval '1 day')
                   + interval '1 month' AS bound) b
WHERE EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = v.key
                                             AND NOT a.attisdropped)
  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'c'
                    AND k.conname ~ ('^' || v.name || '_before_[0-9]{6}$'))

-- step --
-- Then each is validated: one scan of the table under SHARE UPDATE EXCLUSIVE,
-- which lets reads and writes go on.
SELECT format('ALTER TABLE %I VALIDATE CONSTRAINT %I', c.relname, k.conname) AS statement
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND c.relname IN ('ai_marking_attempts', 'ai_marking_results', 'ai_marking_events')
  AND k.contype = 'c' AND k.conname ~ ('^' || c.relname || '_before_[0-9]{6}$')
  AND NOT k.convalidated
