-- Back to the schema before 0053: the caps count ai_marking_claimed under the
-- claim's advisory lock; the slots say nothing the claimed rows do not.
DROP TABLE ai_marking_slots;
