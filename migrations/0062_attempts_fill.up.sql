-- aiqueue 0062: room on the attempts' pages for their line's updates
-- (docs/performance.md, "State tables: what a job writes").
--
-- A dispatch's line is inserted at the claim and updated by its result and by
-- the settle's hand-off link; on a full page the new version goes to another
-- page and every index of the month takes an entry.  Each month of the
-- attempts leaves a fifth of its pages free (new months too:
-- functions/97_partitions.sql); it shapes new pages only.
DO $$
DECLARE
    part regclass;
BEGIN
    FOR part IN SELECT i.inhrelid::regclass FROM pg_inherits i
                WHERE i.inhparent = 'ai_marking_attempts'::regclass LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 80)', part);
    END LOOP;
END
$$;
