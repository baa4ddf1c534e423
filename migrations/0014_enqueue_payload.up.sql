-- aiqueue 0014: an enqueue's payload is stored once, not copied into every row.
--
-- A 2 KB rubric for 10,000 submissions wrote 20 MB.  ai_marking_payloads keeps
-- each distinct payload once, keyed by the sha256 of its jsonb text (so the
-- teacher's next "Mark All" with the same rubric reuses the row); a queue row
-- names it by payload_id, and the claim joins it for the dispatch body.  An
-- empty payload ('{}', the common case) is no row at all: payload_id NULL.
-- No foreign key, and no index on payload_id: a row trigger would cost an
-- enqueue of 10,000 rows as much as the one on submissions does, and an index
-- would be written again by every claim and completion (each updates the row:
-- 0.06 ms of a 0.6 ms claim).  Instead a payload keeps the window of enqueue
-- times that used it: every row naming it was created (created_at, which
-- nothing changes) within [first_used_at, last_used_at], so prune finds its
-- rows with a range of ai_marking_queue_created_idx (see queries.sql).
CREATE TABLE ai_marking_payloads (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sha256 bytea NOT NULL UNIQUE,
    payload jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    first_used_at timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE ai_marking_queue ADD COLUMN payload_id bigint;

INSERT INTO ai_marking_payloads (sha256, payload, first_used_at, last_used_at)
SELECT DISTINCT ON (h) h, payload,
       min(created_at) OVER (PARTITION BY h), max(created_at) OVER (PARTITION BY h)
FROM (SELECT sha256(convert_to(payload::text, 'UTF8')) AS h, payload, created_at
      FROM ai_marking_queue WHERE payload <> '{}'::jsonb) p
ORDER BY h;

UPDATE ai_marking_queue q SET payload_id = p.id
FROM ai_marking_payloads p
WHERE q.payload <> '{}'::jsonb AND p.sha256 = sha256(convert_to(q.payload::text, 'UTF8'));

ALTER TABLE ai_marking_queue DROP COLUMN payload;
