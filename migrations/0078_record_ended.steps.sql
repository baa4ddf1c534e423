-- Before migration 0078 (aiqueue/db/migrate.py prepare): the ended rows of the
-- record copied, in bounded steps under weak locks, into the month partition the
-- upgrade attaches, so that its transaction holds the record's lock only to move
-- the live rows and change the catalog (docs/performance.md, "A year of a
-- district", gives the times).
--
--   ai_marking_queue_ended_upto_YYYYMM   every ended row created before YYYYMM
--                                        (the start of next month, or of the
--                                        month after when next month starts
--                                        within a day), with a check that says
--                                        so: ATTACH then reads no row
--
-- From the first step on, a trigger on the record (aiqueue_upgrade_0078_mirror)
-- writes every change of such a row to the copy as well; the copy runs in page
-- ranges of the record, one committed statement each; then the rows a
-- concurrent delete or retry took away while their range was being copied go;
-- then the record's indexes are built on the copy (CONCURRENTLY); then the copy
-- is marked done, which the upgrade checks together with the trigger's being
-- enabled ALWAYS (a DISABLE TRIGGER USER in between turns that off: then the
-- upgrade ignores the copy, and reads the record under its lock as before).
-- Only on the schema just before 0078 (migration 0077 applied): from an older
-- schema the upgrade takes the one-lock path.  While the copy waits for the
-- upgrade, it takes as much room as the record's ended rows.

-- step --
-- A copy whose bound is a day away or past (a run that never finished) goes.
SELECT format('DROP TRIGGER IF EXISTS aiqueue_upgrade_0078_mirror ON ai_marking_queue; '
              'DROP FUNCTION IF EXISTS aiqueue_upgrade_0078_mirror(); DROP TABLE %I',
              c.relname) AS statement
FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND NOT c.relispartition AND c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'
  AND to_date(right(c.relname, 6), 'YYYYMM')::timestamp
      <= now() AT TIME ZONE 'UTC' + interval '1 day'

-- step --
-- The copy's table: the record's columns, defaults and checks, its key, the
-- check of the month partition it becomes, row-level security on and no
-- privilege but its owner's until the upgrade's lockdown (the platform's
-- default privileges hand every new table to its API roles).
SELECT $step$
DO $upto$
DECLARE
    newest timestamptz := (SELECT max(n.created_at)
                           FROM unnest(ARRAY['live', 'completed', 'failed', 'cancelled',
                                             'expired']) AS p (phase),
                           LATERAL (SELECT q.created_at FROM ai_marking_queue q
                                    WHERE q.phase = p.phase
                                    ORDER BY q.created_at DESC LIMIT 1) n);
    -- The bound's UTC wall time.
    bound timestamp := greatest(date_trunc('month', now() AT TIME ZONE 'UTC' + interval '1 day'),
                                date_trunc('month', newest AT TIME ZONE 'UTC'))
                       + interval '1 month';
    copy text := 'ai_marking_queue_ended_upto_' || to_char(bound, 'YYYYMM');
    who record;
BEGIN
    EXECUTE format('CREATE TABLE %I (LIKE ai_marking_queue INCLUDING DEFAULTS'
                   ' INCLUDING CONSTRAINTS INCLUDING GENERATED INCLUDING STORAGE'
                   ' INCLUDING COMPRESSION) WITH (fillfactor = 80)', copy);
    -- Written as ATTACH's proof wants it (the partition's own constraint says
    -- `(status IN (...)) = false`, which it proves from this and not from itself).
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (created_at < %L'
                   ' AND (status IN (''pending'', ''processing'')) IS NOT NULL'
                   ' AND NOT (status IN (''pending'', ''processing'')))',
                   copy, copy || '_bound', bound AT TIME ZONE 'UTC');
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (queue_id)', copy, copy || '_pkey');
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', copy);
    FOR who IN SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) a
               WHERE c.oid = to_regclass(copy) AND a.grantee <> c.relowner LOOP
        EXECUTE format('REVOKE ALL ON %I FROM %s', copy,
                       CASE WHEN who.grantee = 0 THEN 'PUBLIC'
                            ELSE quote_ident(pg_get_userbyid(who.grantee)) END);
    END LOOP;
END
$upto$
$step$ AS statement
WHERE (SELECT relkind FROM pg_class WHERE oid = to_regclass('ai_marking_queue')) = 'r'
  AND EXISTS (SELECT 1 FROM aiqueue_migrations WHERE version = '0077_slots')
  AND NOT EXISTS (SELECT 1 FROM pg_class c
                  WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
                    AND NOT c.relispartition
                    AND c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$')

-- step --
-- The trigger that keeps the copy: a row that is (or was) ended before the
-- bound is written (or removed) there too.  It runs as the copy's owner (the
-- running app's role has no privilege on it), ALWAYS (a replica session too);
-- nobody else may run it (the platform's default privileges grant routines too).
WITH copy AS (
    SELECT c.oid, c.relname,
           to_date(right(c.relname, 6), 'YYYYMM')::timestamp AT TIME ZONE 'UTC' AS bound
    FROM pg_class c
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
      AND NOT c.relispartition AND c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'
), cols AS (
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) AS names,
           string_agg('NEW.' || quote_ident(a.attname), ', ' ORDER BY a.attnum) AS news,
           string_agg(format('%1$I = excluded.%1$I', a.attname), ', ' ORDER BY a.attnum) AS sets
    FROM copy, pg_attribute a
    WHERE a.attrelid = copy.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
)
SELECT format($trigger$
CREATE FUNCTION aiqueue_upgrade_0078_mirror() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = %1$I, pg_temp AS $mirror$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.status NOT IN ('pending', 'processing')
       AND OLD.created_at < %3$L
       AND (TG_OP = 'DELETE' OR NEW.queue_id <> OLD.queue_id
            OR NEW.status IN ('pending', 'processing') OR NEW.created_at >= %3$L) THEN
        DELETE FROM %2$I WHERE queue_id = OLD.queue_id;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.status NOT IN ('pending', 'processing')
       AND NEW.created_at < %3$L THEN
        INSERT INTO %2$I (%4$s) VALUES (%5$s)
        ON CONFLICT (queue_id) DO UPDATE SET %6$s;
    END IF;
    RETURN NULL;
END
$mirror$;
DO $revoke$
DECLARE
    who record;
BEGIN
    FOR who IN SELECT DISTINCT a.grantee
               FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
               WHERE p.oid = 'aiqueue_upgrade_0078_mirror()'::regprocedure
                 AND a.grantee <> p.proowner LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION aiqueue_upgrade_0078_mirror() FROM %%s',
                       CASE WHEN who.grantee = 0 THEN 'PUBLIC'
                            ELSE quote_ident(pg_get_userbyid(who.grantee)) END);
    END LOOP;
END
$revoke$;
CREATE TRIGGER aiqueue_upgrade_0078_mirror AFTER INSERT OR UPDATE OR DELETE ON ai_marking_queue
    FOR EACH ROW EXECUTE FUNCTION aiqueue_upgrade_0078_mirror();
ALTER TABLE ai_marking_queue ENABLE ALWAYS TRIGGER aiqueue_upgrade_0078_mirror
$trigger$, current_schema(), copy.relname, copy.bound, cols.names, cols.news, cols.sets) AS statement
FROM copy, cols
WHERE NOT EXISTS (SELECT 1 FROM pg_trigger t
                  WHERE t.tgrelid = to_regclass('ai_marking_queue')
                    AND t.tgname = 'aiqueue_upgrade_0078_mirror')

-- step --
-- The copy, a range of 2,048 pages (16 MB) of the record per statement; the
-- last range is open, for the pages written since.  A row the trigger wrote
-- first is left as it is.
WITH copy AS (
    SELECT c.oid, c.relname,
           to_date(right(c.relname, 6), 'YYYYMM')::timestamp AT TIME ZONE 'UTC' AS bound
    FROM pg_class c
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
      AND NOT c.relispartition AND c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'
      AND obj_description(c.oid, 'pg_class') IS NULL
), cols AS (
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) AS names
    FROM copy, pg_attribute a
    WHERE a.attrelid = copy.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
)
SELECT format('INSERT INTO %I (%s) SELECT %s FROM ai_marking_queue'
              ' WHERE ctid >= ''(%s,0)'' %s AND status NOT IN (''pending'', ''processing'')'
              ' AND created_at < %L ON CONFLICT (queue_id) DO NOTHING',
              copy.relname, cols.names, cols.names, r.first,
              CASE WHEN r.first + 2048 <= r.pages THEN format('AND ctid < ''(%s,0)''', r.first + 2048)
                   ELSE '' END,
              copy.bound) AS statement
FROM copy, cols,
     LATERAL (SELECT s AS first, p.pages
              FROM (SELECT greatest(relpages, 1) AS pages FROM pg_class
                    WHERE oid = to_regclass('ai_marking_queue')) p,
                   generate_series(0, p.pages - 1, 2048) s) r
WHERE EXISTS (SELECT 1 FROM pg_trigger t
              WHERE t.tgrelid = to_regclass('ai_marking_queue')
                AND t.tgname = 'aiqueue_upgrade_0078_mirror')
ORDER BY r.first

-- step --
-- A row copied from a range while a concurrent statement deleted it, retried
-- it or moved it past the bound (the trigger found nothing to take away yet)
-- goes now.
SELECT format('DELETE FROM %1$I u WHERE NOT EXISTS (SELECT 1 FROM ai_marking_queue q'
              ' WHERE q.queue_id = u.queue_id AND q.status NOT IN (''pending'', ''processing'')'
              ' AND q.created_at < %2$L)', c.relname,
              to_date(right(c.relname, 6), 'YYYYMM')::timestamp AT TIME ZONE 'UTC') AS statement
FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND NOT c.relispartition AND c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'
  AND obj_description(c.oid, 'pg_class') IS NULL

-- step --
-- A build that did not finish leaves an invalid index: it goes first.
SELECT format('DROP INDEX CONCURRENTLY %I', i.relname) AS statement
FROM pg_class c JOIN pg_index x ON x.indrelid = c.oid JOIN pg_class i ON i.oid = x.indexrelid
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND NOT c.relispartition AND c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'
  AND NOT x.indisvalid

-- step --
-- The record's indexes on the copy, by the same definitions (ATTACH takes them
-- over), each named as the upgrade's one-lock path names them.
SELECT regexp_replace(pg_get_indexdef(x.indexrelid),
                      '^CREATE (UNIQUE )?INDEX \S+ ON \S+ ',
                      format('CREATE \1INDEX CONCURRENTLY IF NOT EXISTS %I ON %I ',
                             replace(i.relname, 'ai_marking_queue_', c.relname || '_'),
                             c.relname)) AS statement
FROM pg_class c
JOIN pg_index x ON x.indrelid = to_regclass('ai_marking_queue') AND NOT x.indisprimary
JOIN pg_class i ON i.oid = x.indexrelid
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND NOT c.relispartition AND c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'
  AND to_regclass(quote_ident(replace(i.relname, 'ai_marking_queue_', c.relname || '_'))) IS NULL
ORDER BY i.relname

-- step --
-- The record's foreign keys on the copy, after its indexes (a submission's
-- delete cascades through its index), NOT VALID: a moment's lock, no read ...
SELECT format('ALTER TABLE %I ADD CONSTRAINT %I %s NOT VALID', c.relname, k.conname,
              pg_get_constraintdef(k.oid)) AS statement
FROM pg_class c
JOIN pg_constraint k ON k.conrelid = to_regclass('ai_marking_queue') AND k.contype = 'f'
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND NOT c.relispartition AND c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'
  AND NOT EXISTS (SELECT 1 FROM pg_constraint o WHERE o.conrelid = c.oid AND o.conname = k.conname)

-- step --
-- ... then validated, reading the copy under a lock that lets reads and writes
-- go on; ATTACH then takes them over instead of checking every row itself.
SELECT format('ALTER TABLE %I VALIDATE CONSTRAINT %I', c.relname, k.conname) AS statement
FROM pg_class c JOIN pg_constraint k ON k.conrelid = c.oid AND k.contype = 'f'
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND NOT c.relispartition AND c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'
  AND NOT k.convalidated

-- step --
-- Done: the upgrade attaches this copy.
SELECT format('COMMENT ON TABLE %I IS %L', c.relname, 'aiqueue 0078: copied') AS statement
FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND NOT c.relispartition AND c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'
  AND obj_description(c.oid, 'pg_class') IS NULL
  AND EXISTS (SELECT 1 FROM pg_trigger t
              WHERE t.tgrelid = to_regclass('ai_marking_queue')
                AND t.tgname = 'aiqueue_upgrade_0078_mirror')
