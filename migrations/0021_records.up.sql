-- aiqueue 0021: a school's data (docs/operating/data-protection.md): the erasure log, the retention
-- gate, and an index for the export and retention of attempt history.
--
-- ai_marking_erasures is what an erasure keeps: no id, no content, only the
-- sha256 of each erased submission's id (so an operator can answer "was this
-- one erased?" by hashing the id again), when, and how many rows of each
-- table went.  One row per erasure (one submission from the API, a batch of
-- an assignment's from the command line).  It is never pruned: it is the
-- proof the erasure happened.
CREATE TABLE ai_marking_erasures (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subjects text[] NOT NULL,
    erased_at timestamptz NOT NULL DEFAULT now(),
    -- who asked, as a channel name: 'api' or 'cli' (never a person's name)
    via text NOT NULL,
    -- {table: rows removed or cleared}
    counts jsonb NOT NULL
);

-- Retention runs at most once a minute across every instance, beside the
-- prune (records/retention.py); its own gate, so each keeps its own pace.
ALTER TABLE ai_queue_control ADD COLUMN last_retain_at timestamptz NOT NULL DEFAULT '-infinity';

-- Attempts arrive in time order: the export's period and the retention's
-- cutoff read a BRIN index that costs next to nothing per claim.
CREATE INDEX ai_marking_attempts_started_idx ON ai_marking_attempts USING brin (started_at);
