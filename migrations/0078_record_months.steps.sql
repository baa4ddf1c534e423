-- Before migration 0078 (aiqueue/db/migrate.py prepare): prove, under a weak
-- lock, that every row of the record (ai_marking_queue) was created before the
-- bound the upgrade attaches it below, so that its ATTACH reads no row while it
-- holds the table (the same steps as 0050's for the history tables).
--
-- The bound is the start of next month (UTC), or of the month after when next
-- month starts within a day: a new row must pass the check until the upgrade
-- follows.  The constraint carries its bound in its name
-- (`ai_marking_queue_before_YYYYMM`), which the upgrade reads and then drops.

-- step --
-- A constraint whose bound is a day away or past (a run that never finished) goes.
SELECT format('ALTER TABLE %I DROP CONSTRAINT %I', c.relname, k.conname) AS statement
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND c.relname = 'ai_marking_queue' AND k.contype = 'c'
  AND CASE WHEN k.conname ~ '^ai_marking_queue_before_[0-9]{6}$'
           THEN to_date(right(k.conname, 6), 'YYYYMM')::timestamp
                <= now() AT TIME ZONE 'UTC' + interval '1 day' END

-- step --
-- The check, NOT VALID: new rows are checked from now on, old ones not yet (a
-- moment's ACCESS EXCLUSIVE lock, no scan).  Only a plain table (before the upgrade).
SELECT format('ALTER TABLE ai_marking_queue ADD CONSTRAINT %I CHECK (created_at < %L) NOT VALID',
              'ai_marking_queue_before_' || to_char(b.bound, 'YYYYMM'),
              b.bound AT TIME ZONE 'UTC') AS statement
FROM pg_class c
CROSS JOIN (SELECT date_trunc('month', now() AT TIME ZONE 'UTC' + interval '1 day')
                   + interval '1 month' AS bound) b
WHERE c.relname = 'ai_marking_queue' AND c.relnamespace = current_schema()::regnamespace
  AND c.relkind = 'r'
  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'c'
                    AND k.conname ~ '^ai_marking_queue_before_[0-9]{6}$')

-- step --
-- Then it is validated: one scan of the table under SHARE UPDATE EXCLUSIVE,
-- which lets reads and writes go on.
SELECT format('ALTER TABLE %I VALIDATE CONSTRAINT %I', c.relname, k.conname) AS statement
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND c.relname = 'ai_marking_queue' AND k.contype = 'c'
  AND k.conname ~ '^ai_marking_queue_before_[0-9]{6}$' AND NOT k.convalidated
