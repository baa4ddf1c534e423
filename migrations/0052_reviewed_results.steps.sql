-- Before migration 0052 (aiqueue/db/migrate.py prepare): the reviewed results'
-- index built on each part of the results with CREATE INDEX CONCURRENTLY, which
-- lets the settle's inserts go on; the migration's CREATE INDEX on the parent
-- then finds each part's index and attaches it instead of building one under a
-- lock that holds every settle up (docs/performance.md, "A year of a district").
-- The parts: each month (after migration 0050), or the one table (before it:
-- 0050 attaches that table as a month, this index with it).

-- step --
-- A build that did not finish leaves an invalid index: it goes first.
SELECT format('DROP INDEX CONCURRENTLY %I', i.relname) AS statement
FROM pg_class i JOIN pg_index x ON x.indexrelid = i.oid
WHERE i.relnamespace = current_schema()::regnamespace AND NOT x.indisvalid
  AND i.relname LIKE 'ai\_marking\_results\_reviewed\_idx%'
  AND x.indrelid IN (SELECT c.oid FROM pg_class c WHERE c.relkind = 'r')

-- step --
SELECT format('CREATE INDEX CONCURRENTLY %I ON %I (seq) WHERE review <> ''unreviewed''',
              'ai_marking_results_reviewed_idx'
              || CASE WHEN c.relname = 'ai_marking_results' THEN ''
                      ELSE substr(c.relname, length('ai_marking_results') + 1) END,
              c.relname) AS statement
FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND (c.relname = 'ai_marking_results'
       OR c.oid IN (SELECT i.inhrelid FROM pg_inherits i
                    WHERE i.inhparent = to_regclass('ai_marking_results')))
  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'review'
                                            AND NOT a.attisdropped)
  AND NOT EXISTS (SELECT 1 FROM pg_index x WHERE x.indrelid = c.oid
                  AND pg_get_expr(x.indpred, x.indrelid) LIKE '%review%unreviewed%')
