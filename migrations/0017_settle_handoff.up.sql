-- aiqueue 0017: a lost commit answer leaves no claimed row without a dispatch
-- (docs/deploying/index.md).  A settle (a result, then the next claim, in one
-- transaction) notes on the result's dispatch line which row it claimed next;
-- the app notes when it takes a claimed row to send it.  A repeat of the
-- result whose first answer was lost then gets that row back, unsent, instead
-- of claiming a second one.
ALTER TABLE ai_marking_attempts
    ADD COLUMN next_queue_id uuid,
    ADD COLUMN next_seq integer,
    ADD COLUMN sent_at timestamptz;
