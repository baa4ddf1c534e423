-- Before migration 0072 (aiqueue/db/migrate.py prepare): the queue list's
-- assignment and group indexes built with CREATE INDEX CONCURRENTLY, which lets
-- enqueues and settles go on (a build at 10,000,000 rows takes minutes on a small
-- database); the migration's CREATE INDEX IF NOT EXISTS then finds them.  Only
-- once the record has its phase (migration 0067): before that, nothing to do.

-- step --
-- A build that did not finish leaves an invalid index: it goes first.
SELECT format('DROP INDEX CONCURRENTLY %I', i.relname) AS statement
FROM pg_class i JOIN pg_index x ON x.indexrelid = i.oid
WHERE i.relnamespace = current_schema()::regnamespace AND NOT x.indisvalid
  AND i.relname IN ('ai_marking_queue_assignment_list_idx', 'ai_marking_queue_group_list_idx')

-- step --
SELECT format('CREATE INDEX CONCURRENTLY IF NOT EXISTS %I ON ai_marking_queue (%s, phase, '
              'created_at DESC, queue_id DESC)', i.name, i.key) AS statement
FROM (VALUES ('ai_marking_queue_assignment_list_idx', 'assignment_id'),
             ('ai_marking_queue_group_list_idx', '(coalesce(group_key, assignment_id))')) i (name, key)
WHERE EXISTS (SELECT 1 FROM pg_attribute a
              WHERE a.attrelid = to_regclass('ai_marking_queue') AND a.attname = 'phase'
                AND NOT a.attisdropped)
  AND to_regclass(i.name) IS NULL
