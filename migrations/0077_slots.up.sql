-- aiqueue 0077: the in-flight caps are held by slot rows, not by one lock
-- (docs/architecture.md, sql/functions/36_slots.sql).
--
-- Before, every claim took one advisory lock held to its commit, and counted
-- the pool's and the kind's rows of ai_marking_claimed under it.  Now a claim
-- takes a free numbered slot row of its pool (kind '') and of its kind (where
-- the kind has a cap) with FOR UPDATE SKIP LOCKED.  A slot names the dispatch
-- that holds it and is free once that dispatch's row of ai_marking_claimed is
-- gone, so the ends of a dispatch write nothing here.  Only the holder
-- changes: no index names it, so taking a slot is a heap-only update (the
-- fillfactor leaves the room).
CREATE TABLE ai_marking_slots (
    pool text NOT NULL,
    kind text NOT NULL,  -- '': the pool's slots; else the kind a row runs as
    n integer NOT NULL,
    queue_id uuid,
    dispatch_seq integer,
    PRIMARY KEY (pool, kind, n)
) WITH (fillfactor = 50);

-- The rows in flight hold slots: numbered per pool, and per pool and kind, in
-- the order they were leased.  (Numbers above a cap count against it until
-- their dispatches end.)
INSERT INTO ai_marking_slots (pool, kind, n, queue_id, dispatch_seq)
SELECT c.pool, '', row_number() OVER (PARTITION BY c.pool ORDER BY c.lease_at, c.queue_id),
       c.queue_id, c.dispatch_seq
FROM ai_marking_claimed c;
INSERT INTO ai_marking_slots (pool, kind, n, queue_id, dispatch_seq)
SELECT c.pool, coalesce(c.run_kind, c.kind),
       row_number() OVER (PARTITION BY c.pool, coalesce(c.run_kind, c.kind)
                          ORDER BY c.lease_at, c.queue_id),
       c.queue_id, c.dispatch_seq
FROM ai_marking_claimed c;

-- What one claim's walk carries while other claims charge groups at once
-- (sql/functions/43_fair_race.sql).
CREATE TYPE aiqueue_race AS (pool text, priority integer, group_key text, counter float8,
                             waits boolean, again boolean, held boolean);
