-- aiqueue 0061: room on submissions' pages for a result's update
-- (docs/performance.md, "State tables: what a job writes").
--
-- A settle writes ai_result and ai_marked_at into the submission's row; on a
-- full page the new version goes to another page and every index of the table
-- takes an entry (57 % of these updates in the saturation bench).  A fillfactor
-- leaves room on each page for it.  Only where migration 0001 created the table:
-- the host's own table is the host's to change (the doctor says how, and
-- docs/operating/doctor.md why).  SET (fillfactor) takes a lock that blocks no
-- read or write, only other schema changes and vacuum; it is tried for a
-- second at most and left to the doctor's advice when something holds the
-- table.  It shapes new pages only: a page already full stays so until the
-- table is rewritten.
DO $$
DECLARE
    waits text := current_setting('lock_timeout');
BEGIN
    IF EXISTS (SELECT 1 FROM aiqueue_meta WHERE key = 'created_submissions')
       AND NOT EXISTS (SELECT 1 FROM pg_class c, pg_options_to_table(c.reloptions) o
                       WHERE c.oid = 'submissions'::regclass
                         AND o.option_name = 'fillfactor') THEN
        BEGIN
            PERFORM set_config('lock_timeout', '1s', true);
            ALTER TABLE submissions SET (fillfactor = 80);
            INSERT INTO aiqueue_meta (key, value) VALUES ('submissions_fillfactor', '80')
            ON CONFLICT (key) DO NOTHING;
        EXCEPTION WHEN lock_not_available THEN
            RAISE NOTICE 'submissions is in use: its fillfactor is left as it is';
        END;
        PERFORM set_config('lock_timeout', waits, true);
    END IF;
END
$$;
