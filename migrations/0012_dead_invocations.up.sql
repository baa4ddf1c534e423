-- aiqueue 0012: what the platform said about a dispatch (docs/guarantees.md), on its
-- history line.  `platform`: still_running, applied_from_activation,
-- activation_failed, timed_out or lookup_failed; `look_after`: when the queue
-- may ask the platform about this dispatch again (an activation not found yet,
-- or a look another instance is making right now).
ALTER TABLE ai_marking_attempts ADD COLUMN platform text, ADD COLUMN look_after timestamptz;
