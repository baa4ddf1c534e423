-- aiqueue 0007: fair turns between groups, and remembered enqueue answers.
--
-- Turns: every row carries its group and its turn, the round in which its group
-- gets it dispatched.  A group's k-th waiting row has turn (the turn at the head
-- of the queue when it joined) + k, so ordering by (priority DESC, turn, seq)
-- serves one row of every group per round, groups within a round in the order
-- they joined, rows of a group in enqueue order (functions.sql: aiqueue_enqueue).
-- group_key NULL means the default group, the row's assignment.
ALTER TABLE ai_marking_queue
    ADD COLUMN group_key text,
    ADD COLUMN turn bigint NOT NULL DEFAULT 0;

-- The claim walks this index in dispatch order and stops at the first due row.
-- run_after rides along so next_wakeup's min(run_after) of the pending rows
-- stays an index-only scan, as it was on the old (priority, run_after, seq).
DROP INDEX ai_marking_queue_claim_idx;
CREATE INDEX ai_marking_queue_claim_idx
    ON ai_marking_queue (priority DESC, turn, seq) INCLUDE (run_after)
    WHERE status = 'pending';

-- The last turn handed to each group at each priority: the next enqueue of the
-- group continues after it (or at the head, when the group has emptied).  Its
-- row lock also orders concurrent enqueues of one group.
CREATE TABLE ai_marking_groups (
    priority integer NOT NULL,
    group_key text NOT NULL,
    last_turn bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (priority, group_key)
);

-- Idempotency-Key: the first answer to a key, replayed for 24 h to a repeat
-- with the same body (body_hash); pruned with the queue rows.
CREATE TABLE ai_marking_idempotency (
    key text PRIMARY KEY,
    body_hash text NOT NULL,
    answer text,  -- the 202 body as first sent (jsonb would reorder its keys)
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ai_marking_idempotency_created_idx ON ai_marking_idempotency (created_at);
