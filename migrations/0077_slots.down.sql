-- A copy that migration 0078's preparation steps made, when the upgrade did not
-- follow, goes with the trigger that kept it (it knows this schema's columns).
DROP TRIGGER IF EXISTS aiqueue_upgrade_0078_mirror ON ai_marking_queue;
DROP FUNCTION IF EXISTS aiqueue_upgrade_0078_mirror();
DO $copy$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT relname FROM pg_class
             WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'
               AND NOT relispartition AND relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$' LOOP
        EXECUTE format('DROP TABLE %I', c.relname);
    END LOOP;
END
$copy$;
-- Back to the schema before 0077: the caps count ai_marking_claimed under the
-- claim's advisory lock; the slots say nothing the claimed rows do not.  The
-- functions that name the slots or the race's type go with them (the pick's
-- and the cache's result had another shape before; the next `up` makes them).
DROP FUNCTION IF EXISTS aiqueue_race_start(), aiqueue_race_walk(aiqueue_race),
    aiqueue_race_behind(aiqueue_race, integer, float8),
    aiqueue_race_held(aiqueue_race), aiqueue_race_lock(aiqueue_race, text, integer, text, float8),
    aiqueue_race_wait(aiqueue_race);
DROP FUNCTION IF EXISTS aiqueue_slot_take(text, text, integer, boolean),
    aiqueue_slots_fold(text, text, integer), aiqueue_slots_pool(jsonb, text),
    aiqueue_slots_kind(jsonb, text, uuid), aiqueue_fair_pick(text[], jsonb, jsonb),
    aiqueue_fair_take(text, integer, text, bigint, text[], jsonb, jsonb, jsonb),
    aiqueue_cache_local(jsonb, jsonb, text[], text, integer, float8, jsonb);
DROP TYPE aiqueue_race;
DROP TABLE ai_marking_slots;
