-- Back to the schema before 0061: submissions without the fillfactor 0061 set.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM aiqueue_meta WHERE key = 'submissions_fillfactor') THEN
        ALTER TABLE submissions RESET (fillfactor);
        DELETE FROM aiqueue_meta WHERE key = 'submissions_fillfactor';
    END IF;
END
$$;
