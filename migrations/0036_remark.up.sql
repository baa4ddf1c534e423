-- aiqueue 0036: a rubric changes, and only what it changed is marked again
-- (docs/remark.md).
--
-- Every result records the payload it was marked under (`payload_version`, the
-- hex of ai_marking_payloads.sha256; NULL for the empty payload), with the
-- function's version and the provider the function reported: the audit record
-- a school keeps of each mark (docs/remark.md, "What each mark records").
-- `applied` is false for a result that came in under an older payload than the
-- one already applied: it is recorded, never applied over the newer mark.
ALTER TABLE ai_marking_results
    ADD COLUMN payload_version text,
    ADD COLUMN function_version text,
    ADD COLUMN provider text,
    ADD COLUMN applied boolean NOT NULL DEFAULT true;

UPDATE ai_marking_results m SET payload_version = encode(p.sha256, 'hex')
FROM ai_marking_queue q JOIN ai_marking_payloads p ON p.id = q.payload_id
WHERE q.queue_id = m.queue_id;

-- One row per re-mark (POST /api/marking/remark): its assignment, the payload it
-- made current and the run its rows joined.  The assignment's newest re-mark
-- names its current payload; a later one within its debounce replaces it.
CREATE TABLE ai_marking_remarks (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    assignment_id text NOT NULL,
    payload_id bigint,
    payload_version text,
    run_id uuid,
    enqueued integer NOT NULL DEFAULT 0,
    superseded integer NOT NULL DEFAULT 0,
    actor text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ai_marking_remarks_assignment_idx ON ai_marking_remarks (assignment_id, id DESC);
CREATE INDEX ai_marking_remarks_run_idx ON ai_marking_remarks (run_id);

-- A submission may have one live row per payload: a re-mark's row waits beside a
-- row of the old payload that is already at the function (its late result is
-- recorded, not applied over the new one).  An enqueue still adds none beside
-- a live row of any payload unless it re-marks (enqueue.sql).
DROP INDEX ai_marking_queue_active_uniq;
CREATE UNIQUE INDEX ai_marking_queue_active_uniq
    ON ai_marking_queue (submission_id, coalesce(payload_id, 0))
    WHERE status IN ('pending', 'processing');
