"""A test-database-only audit of result writes: one row per write of a submission's result."""

from __future__ import annotations

# Test-database-only audit: one row per write of a submission's result.
AUDIT_SQL = """
CREATE TABLE chaos_applied (
    id bigint GENERATED ALWAYS AS IDENTITY,
    submission_id uuid NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION chaos_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_applied (submission_id) VALUES (NEW.id);
    RETURN NULL;
END
$$;
CREATE TRIGGER chaos_audit AFTER UPDATE OF ai_result, ai_marked_at ON submissions
    FOR EACH ROW EXECUTE FUNCTION chaos_audit();
"""
