-- aiqueue 0002: the marking payload per assignment (for the teacher page) and the
-- index behind the live-events cursor.

-- What the teacher page hands to enqueue for an assignment (question, rubric,
-- max_score ...), unchanged.  A host app with its own assignments fills it from there.
CREATE TABLE ai_marking_assignments (
    assignment_id text PRIMARY KEY,
    title text NOT NULL DEFAULT '',
    payload jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(payload) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Live events read an assignment's feed in (tx, id) order (sql/live.sql says why).
CREATE INDEX ai_marking_events_cursor_idx ON ai_marking_events (assignment_id, tx, id);
