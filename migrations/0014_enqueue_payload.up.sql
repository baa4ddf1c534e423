-- aiqueue 0014: an enqueue's payload is stored once, not copied into every row.
--
-- A 2 KB rubric for 10,000 submissions wrote 20 MB.  ai_marking_payloads keeps
-- each distinct payload once, keyed by the sha256 of its jsonb text (so the
-- teacher's next "Mark All" with the same rubric reuses the row); a queue row
-- names it by payload_id, and the claim joins it for the dispatch body.  An
-- empty payload ('{}', the common case) is no row at all: payload_id NULL.
-- No foreign key: its per-row trigger would cost an enqueue of 10,000 rows as
-- much as the one on submissions does; the enqueue writes both in one
-- statement, and prune deletes payloads no row names (see queries.sql).
CREATE TABLE ai_marking_payloads (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sha256 bytea NOT NULL UNIQUE,
    payload jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Last enqueue that used it: prune leaves a payload alone for an hour after.
    used_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE ai_marking_queue ADD COLUMN payload_id bigint;

INSERT INTO ai_marking_payloads (sha256, payload)
SELECT DISTINCT ON (h) h, payload
FROM (SELECT sha256(convert_to(payload::text, 'UTF8')) AS h, payload
      FROM ai_marking_queue WHERE payload <> '{}'::jsonb) p
ORDER BY h;

UPDATE ai_marking_queue q SET payload_id = p.id
FROM ai_marking_payloads p
WHERE q.payload <> '{}'::jsonb AND p.sha256 = sha256(convert_to(q.payload::text, 'UTF8'));

ALTER TABLE ai_marking_queue DROP COLUMN payload;

-- Prune asks "does any row still name this payload?"
CREATE INDEX ai_marking_queue_payload_idx
    ON ai_marking_queue (payload_id) WHERE payload_id IS NOT NULL;
