-- Back to the schema before 0060: the turn order's index on the counter itself.
-- The key's function takes the table's row (the next `migrate up` re-creates it).
DROP FUNCTION IF EXISTS aiqueue_fair_key(ai_marking_fair, boolean, float8, bigint, bigint);
DROP INDEX ai_marking_fair_walk_idx;
DROP INDEX ai_marking_fair_key_idx;
DROP INDEX ai_marking_fair_warm_idx;
ALTER TABLE ai_marking_fair DROP COLUMN walk_key, DROP COLUMN walk_turn, DROP COLUMN walk_seq;
ALTER TABLE ai_marking_fair RESET (fillfactor);
CREATE INDEX ai_marking_fair_walk_idx
    ON ai_marking_fair (priority DESC, counter, head_turn, head_seq) WHERE waiting;
CREATE INDEX ai_marking_fair_counter_idx ON ai_marking_fair (pool, priority, counter);
CREATE INDEX ai_marking_fair_warm_idx ON ai_marking_fair (pool, priority, counter)
    WHERE waiting AND warm_until IS NOT NULL;
