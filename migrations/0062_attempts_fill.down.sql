-- Back to the schema before 0062: the attempts' months without a fillfactor.
DO $$
DECLARE
    part regclass;
BEGIN
    FOR part IN SELECT i.inhrelid::regclass FROM pg_inherits i
                WHERE i.inhparent = 'ai_marking_attempts'::regclass LOOP
        EXECUTE format('ALTER TABLE %s RESET (fillfactor)', part);
    END LOOP;
END
$$;
