-- The record's ended rows with no end time (docs/operating/data-protection.md,
-- "Retention by the month"): a month with one is kept (its period cannot be
-- told), and the month's drop asks whether it holds one
-- (functions/98_record_months.sql aiqueue_record_month_kept).  Without this
-- index that question read the whole month (86 ms warm at 1,000,000 rows, most
-- of half a second cold: docs/performance.md, "A year of a district"); with it,
-- a probe of an index that is nearly empty (every end sets finished_at; an
-- insert only evaluates the predicate).  Each month gets it as the parent's
-- other indexes (functions/97_partitions.sql, months made later included).
-- The status test is redundant on the ended rows; it lets the same index be
-- built on the record of before 0078 (one table), which 0078 attaches as a
-- month with its indexes.
--
-- The preparation steps (0079_ended_unfinished.steps.sql) built it on each
-- month with CREATE INDEX CONCURRENTLY: this finds and attaches them, and
-- builds it only on a month that had none (a new one, empty).
CREATE INDEX IF NOT EXISTS ai_marking_queue_ended_unfinished_idx
    ON ai_marking_queue_ended (created_at)
    WHERE finished_at IS NULL AND status NOT IN ('pending', 'processing');

-- Those it built named as the steps name theirs: the parent's name with the
-- month (functions/97_partitions.sql), or, for the rows from before the
-- upgrade, that part's own (0078).
DO $named$
DECLARE
    ix record;
BEGIN
    FOR ix IN SELECT i.oid::regclass AS child,
                     CASE WHEN c.relname LIKE 'ai\_marking\_queue\_ended\_upto\_%'
                          THEN c.relname || '_unfinished_idx'
                          ELSE 'ai_marking_queue_ended_unfinished_idx'
                               || substr(c.relname, length('ai_marking_queue_ended') + 1)
                     END AS named, i.relname
              FROM pg_inherits h JOIN pg_class i ON i.oid = h.inhrelid
              JOIN pg_index x ON x.indexrelid = i.oid JOIN pg_class c ON c.oid = x.indrelid
              WHERE h.inhparent = 'ai_marking_queue_ended_unfinished_idx'::regclass LOOP
        IF ix.relname <> ix.named THEN
            EXECUTE format('ALTER INDEX %s RENAME TO %I', ix.child, ix.named);
        END IF;
    END LOOP;
END
$named$;
