-- aiqueue 0015: answers to the doctor's probe dispatches (docs/operating/doctor.md).
-- A probe has no queue row and no submission: the webhook records what the
-- function answered here, and the doctor waiting on any instance reads it.
CREATE TABLE ai_marking_probes (
    probe_id uuid PRIMARY KEY,
    -- what the function called back: 'probe' (it knows probes), or the status
    -- of a job item ('completed', 'failed', 'progress'): a function too old to
    -- know probes, which treated it as a job.
    answer text NOT NULL,
    -- content-free facts only: the function's name/version, an error code.
    detail jsonb NOT NULL DEFAULT '{}'::jsonb,
    answered_at timestamptz NOT NULL DEFAULT now()
);
