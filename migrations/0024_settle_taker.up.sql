-- aiqueue 0024: the hand-off of a claimed row rides in its settle (one round
-- trip per result, docs/performance.md).  A settle marks the row it claims as taken
-- by the caller (`taken_by`, a token the app makes per webhook and keeps across
-- its retries; sent_at: when).  A repeat of the result whose first answer was
-- lost, with the same token, gets that row back; any other caller never does,
-- so a row is sent by one caller only.
ALTER TABLE ai_marking_attempts
    ADD COLUMN taken_by uuid;
