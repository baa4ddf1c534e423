-- After migration 0078 commits (aiqueue/db/migrate.py after): a partitioned
-- parent's statistics are gathered by ANALYZE only (autovacuum analyzes its
-- partitions); the planner reads them for the parent's joins.  It samples every
-- partition (8 s at 10,000,000 rows on a 2-core VM), under a lock that lets
-- reads and writes go on, so it runs outside the upgrade's transaction.
ANALYZE ai_marking_queue;
