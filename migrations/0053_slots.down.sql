-- Back to the schema before 0053: the caps count ai_marking_claimed under the
-- claim's advisory lock; the slots say nothing the claimed rows do not.
DROP FUNCTION IF EXISTS aiqueue_race_start(), aiqueue_race_walk(aiqueue_race),
    aiqueue_race_behind(aiqueue_race, integer, float8),
    aiqueue_race_lock(aiqueue_race, text, integer, text, float8),
    aiqueue_race_wait(aiqueue_race);
DROP TYPE aiqueue_race;
DROP TABLE ai_marking_slots;
