-- Before migration 0079 (aiqueue/db/migrate.py prepare): the index of the
-- ended rows with no end time built on each month of the record with CREATE
-- INDEX CONCURRENTLY, which lets the settles that end rows go on; the
-- migration's CREATE INDEX on the parent then finds each month's index and
-- attaches it instead of reading every month under its lock
-- (docs/performance.md, "A year of a district").  The parts: each month of the
-- ended rows (after migration 0078), named as the parent's index with the
-- month (`_m202611`, `_default`, functions/97_partitions.sql) or, for the rows
-- from before the upgrade, as that part's own indexes (`<part>_unfinished_idx`);
-- or the one table of before 0078, which 0078 attaches as a month with this
-- index (renamed as that part's), or, when 0078's steps made one, their copy of
-- its ended rows, which 0078 attaches instead.  Nothing on a database without
-- the record yet.

-- step --
-- A build that did not finish leaves an invalid index: it goes first.
SELECT format('DROP INDEX CONCURRENTLY %I', i.relname) AS statement
FROM pg_class i JOIN pg_index x ON x.indexrelid = i.oid
WHERE i.relnamespace = current_schema()::regnamespace AND NOT x.indisvalid
  AND i.relname LIKE 'ai\_marking\_queue\_%unfinished\_idx%'
  AND x.indrelid IN (SELECT c.oid FROM pg_class c WHERE c.relkind = 'r')

-- step --
SELECT format('CREATE INDEX CONCURRENTLY %I ON %I (created_at)'
              ' WHERE finished_at IS NULL AND status NOT IN (''pending'', ''processing'')',
              CASE WHEN c.relname = 'ai_marking_queue' THEN 'ai_marking_queue_unfinished_idx'
                   WHEN c.relname LIKE 'ai\_marking\_queue\_ended\_upto\_%'
                       THEN c.relname || '_unfinished_idx'
                   ELSE 'ai_marking_queue_ended_unfinished_idx'
                        || substr(c.relname, length('ai_marking_queue_ended') + 1) END,
              c.relname) AS statement
FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND ((c.relname = 'ai_marking_queue' AND NOT EXISTS (
            SELECT 1 FROM pg_class u
            WHERE u.relnamespace = c.relnamespace AND u.relkind = 'r' AND NOT u.relispartition
              AND u.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'))
       OR (c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$' AND NOT c.relispartition)
       OR c.oid IN (SELECT i.inhrelid FROM pg_inherits i
                    WHERE i.inhparent = to_regclass('ai_marking_queue_ended')))
  AND (SELECT count(*) FROM pg_attribute a
       WHERE a.attrelid = c.oid AND a.attname IN ('created_at', 'finished_at', 'status')
         AND NOT a.attisdropped) = 3
  AND NOT EXISTS (SELECT 1 FROM pg_index x WHERE x.indrelid = c.oid
                  AND pg_get_expr(x.indpred, x.indrelid) LIKE '%finished_at IS NULL%')
