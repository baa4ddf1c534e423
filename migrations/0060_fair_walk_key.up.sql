-- aiqueue 0060: a group's turn counter updated heap-only (docs/performance.md,
-- "State tables: what a job writes").
--
-- Every dispatch charges its group's counter and moves its head, and both
-- were keys of the turn order's index: each claim was a non-HOT update of the
-- group's row, one new entry in each of three indexes.  The index now orders
-- the waiting groups by the walk key (walk_key, walk_turn, walk_seq): a lower
-- bound of (counter, head_turn, head_seq) that every writer of the row moves only
-- when it must (functions/40_fair.sql, aiqueue_fair_key): when the row stops or
-- starts waiting, when the true order falls below it, and when more than a few
-- waiting groups lie between the key and the true order, so the walk never
-- reads more than those to find the exact smallest counter.  A group that is not
-- waiting keeps its key equal to its counter (the largest counter, which a group
-- starting alone is lifted to, is read from the key).
ALTER TABLE ai_marking_fair
    ADD COLUMN walk_key float8,
    ADD COLUMN walk_turn bigint,
    ADD COLUMN walk_seq bigint;
UPDATE ai_marking_fair SET walk_key = counter, walk_turn = head_turn, walk_seq = head_seq;
ALTER TABLE ai_marking_fair
    ALTER COLUMN walk_key SET NOT NULL, ALTER COLUMN walk_key SET DEFAULT 0,
    ALTER COLUMN walk_turn SET NOT NULL, ALTER COLUMN walk_turn SET DEFAULT 0,
    ALTER COLUMN walk_seq SET NOT NULL, ALTER COLUMN walk_seq SET DEFAULT 0;
-- Room on the page for the new versions of the few rows a pool has.
ALTER TABLE ai_marking_fair SET (fillfactor = 70);

DROP INDEX ai_marking_fair_walk_idx;
DROP INDEX ai_marking_fair_counter_idx;
DROP INDEX ai_marking_fair_warm_idx;
-- The claim's walk: waiting groups, priority first, then the walk key.
CREATE INDEX ai_marking_fair_walk_idx
    ON ai_marking_fair (priority DESC, walk_key, walk_turn, walk_seq) WHERE waiting;
-- A group that starts waiting with nobody waiting is lifted to the largest counter.
CREATE INDEX ai_marking_fair_key_idx ON ai_marking_fair (pool, priority, walk_key);
-- Warm groups near the smallest counter (the prompt cache's locality).
CREATE INDEX ai_marking_fair_warm_idx ON ai_marking_fair (pool, priority, walk_key)
    WHERE waiting AND warm_until IS NOT NULL;
