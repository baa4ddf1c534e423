-- Who may reach the queue: the lockdown `migrate up` applies
-- (aiqueue/db/migrate.py); the doctor's view of it is security.sql.
--
-- The queue's objects are taken from the catalog, never from a list kept by
-- hand, so a table a later migration adds is locked like the rest:
--   every table, partitioned table, foreign table, view, materialized view,
--   sequence and routine in the schema the migrations run in
--   (current_schema(), where aiqueue_migrations lives) whose name starts with
--   `ai_marking_`, `ai_queue_` or `aiqueue_` (LIKE's `_` is a wildcard, so each
--   one is escaped: a host's `ai_prompts` or `aimless` is not ours).
-- Those three prefixes are reserved for aiqueue in that schema; a host's
-- `ai_prompts` table or `ai_summarise()` function keeps every privilege and
-- setting it had.  `submissions` is a queue object only when migration 0001
-- created it (aiqueue_meta created_submissions): then it is locked like the
-- rest.  The host's own `submissions` keeps the privileges its owner gave it,
-- and the runtime role only gains SELECT and UPDATE (ai_result, ai_marked_at)
-- on it (the doctor warns when another role can read it: submissions_readers).
--
-- The platform's own roles (a superuser, or a role with BYPASSRLS that is a
-- member of pg_read_all_data: Supabase's supabase_admin,
-- supabase_read_only_user, supabase_etl_admin) reach everything by design and
-- can't be locked out by a migration: the check leaves them out and the doctor
-- lists them as a note (platform_roles).

-- lockdown --
-- Run by `migrate up` after the migrations and functions, every time, in the
-- same transaction.  Idempotent, and it changes only what differs (a policy or
-- RLS switch would otherwise take an ACCESS EXCLUSIVE lock on every start).
-- The runtime role comes from the transaction setting aiqueue.runtime_role
-- (`--runtime-role`; empty: keep the one recorded in aiqueue_meta).
--   * Row-level security on every queue table.  The one policy is
--     aiqueue_runtime, for the runtime role only: every other role has no
--     policy, so even a privilege granted by mistake reads no row.
--   * Every privilege of every role but the owner and the runtime role is
--     revoked (PUBLIC included, and the roles that default privileges such as
--     Supabase's anon, authenticated and service_role were handed); the runtime
--     role holds exactly what the app needs.
--   * Views run with their caller's rights (security_invoker, PostgreSQL 15+).
--   * No routine is executable by PUBLIC; a SECURITY DEFINER one pins its search_path.
DO $lockdown$
DECLARE
    wanted text := nullif(current_setting('aiqueue.runtime_role', true), '');
    runtime text;
    runtime_oid oid;
    previous text;
    obj record;
    who record;
    needs text[];
    has text[];
    ours_submissions boolean;
BEGIN
    IF to_regclass('aiqueue_meta') IS NULL THEN
        RETURN;  -- nothing migrated yet
    END IF;
    ours_submissions := EXISTS (SELECT 1 FROM aiqueue_meta
                                WHERE key = 'created_submissions' AND value = 'true');
    previous := (SELECT value FROM aiqueue_meta WHERE key = 'runtime_role');
    runtime := coalesce(wanted, previous);
    IF runtime IS NOT NULL THEN
        runtime_oid := (SELECT oid FROM pg_roles WHERE rolname = runtime);
        IF runtime_oid IS NULL THEN
            RAISE EXCEPTION 'the runtime role "%" does not exist (CREATE ROLE it first)', runtime;
        END IF;
    END IF;
    IF wanted IS NOT NULL AND wanted IS DISTINCT FROM previous THEN
        INSERT INTO aiqueue_meta (key, value) VALUES ('runtime_role', wanted)
        ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        -- Take back from the role this replaces what we gave it on the host's table.
        IF previous IS NOT NULL AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = previous)
                AND to_regclass('submissions') IS NOT NULL THEN
            EXECUTE format('REVOKE SELECT, UPDATE (ai_result, ai_marked_at) ON submissions'
                           ' FROM %I', previous);
        END IF;
    END IF;

    FOR obj IN
        SELECT c.oid, c.relkind, c.relowner, c.relrowsecurity, c.reloptions,
               format('%I.%I', n.nspname, c.relname) AS name, c.relname::text AS relname,
               CASE WHEN c.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END AS noun,
               coalesce(c.relacl, acldefault(CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char",
                                             c.relowner)) AS acl
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'f', 'v', 'm', 'S')
          AND (c.relname LIKE 'ai\_marking\_%' OR c.relname LIKE 'ai\_queue\_%'
               OR c.relname LIKE 'aiqueue\_%'
               OR (c.relname = 'submissions' AND ours_submissions))
    LOOP
        needs := CASE
            WHEN runtime IS NULL THEN '{}'
            WHEN obj.relkind = 'S' THEN '{SELECT,USAGE}'
            WHEN obj.relkind IN ('v', 'm') THEN '{SELECT}'
            -- Bookkeeping of `migrate`: the app reads it, only the owner writes it.
            WHEN obj.relname IN ('aiqueue_migrations', 'aiqueue_meta') THEN '{SELECT}'
            -- Our own submissions: read, and UPDATE (ai_result, ai_marked_at) below.
            WHEN obj.relname = 'submissions' THEN '{SELECT}'
            ELSE '{DELETE,INSERT,SELECT,UPDATE}' END;
        -- Every grantee but the owner loses everything, the runtime role too when
        -- what it holds is not exactly `needs` (column grants count as a difference).
        FOR who IN
            SELECT g.grantee,
                   CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END AS role
            FROM (SELECT a.grantee FROM aclexplode(obj.acl) a
                  UNION
                  SELECT a.grantee FROM pg_attribute t, aclexplode(t.attacl) a
                  WHERE t.attrelid = obj.oid AND t.attacl IS NOT NULL) g
            LEFT JOIN pg_roles r ON r.oid = g.grantee
            WHERE g.grantee <> obj.relowner AND (g.grantee = 0 OR r.oid IS NOT NULL)
        LOOP
            IF who.grantee = runtime_oid THEN
                has := ARRAY(SELECT DISTINCT a.privilege_type FROM aclexplode(obj.acl) a
                             WHERE a.grantee = runtime_oid ORDER BY 1);
                CONTINUE WHEN has = needs AND NOT EXISTS (
                    SELECT 1 FROM pg_attribute t, aclexplode(t.attacl) a
                    WHERE t.attrelid = obj.oid AND t.attacl IS NOT NULL
                      AND a.grantee = runtime_oid
                      AND NOT (obj.relname = 'submissions' AND a.privilege_type = 'UPDATE'
                               AND t.attname IN ('ai_result', 'ai_marked_at')));
            END IF;
            EXECUTE format('REVOKE ALL ON %s %s FROM %s CASCADE', obj.noun, obj.name, who.role);
        END LOOP;
        -- Read the ACL again: the revokes above may have just changed it.
        IF runtime IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM pg_class c,
                              aclexplode(coalesce(c.relacl, acldefault('r'::"char", c.relowner))) a
                WHERE c.oid = obj.oid AND a.grantee = runtime_oid) THEN
            EXECUTE format('GRANT %s ON %s %s TO %I', array_to_string(needs, ', '), obj.noun,
                           obj.name, runtime);
        END IF;

        IF obj.relkind IN ('r', 'p') THEN
            IF NOT obj.relrowsecurity THEN
                EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', obj.name);
            END IF;
            -- The runtime role's policy, re-created only when it names another role.
            IF EXISTS (SELECT 1 FROM pg_policy p
                       WHERE p.polrelid = obj.oid AND p.polname = 'aiqueue_runtime'
                         AND p.polroles IS DISTINCT FROM ARRAY[runtime_oid]) THEN
                EXECUTE format('DROP POLICY aiqueue_runtime ON %s', obj.name);
            END IF;
            IF runtime IS NOT NULL AND NOT EXISTS (
                    SELECT 1 FROM pg_policy p
                    WHERE p.polrelid = obj.oid AND p.polname = 'aiqueue_runtime') THEN
                EXECUTE format('CREATE POLICY aiqueue_runtime ON %s TO %I'
                               ' USING (true) WITH CHECK (true)', obj.name, runtime);
            END IF;
        ELSIF obj.relkind = 'v' AND current_setting('server_version_num')::int >= 150000
                AND NOT coalesce('security_invoker=true' = ANY (obj.reloptions), false) THEN
            EXECUTE format('ALTER VIEW %s SET (security_invoker = true)', obj.name);
        END IF;
    END LOOP;

    FOR obj IN
        SELECT p.oid, p.proowner, p.prosecdef, p.proconfig, p.oid::regprocedure::text AS name,
               coalesce(p.proacl, acldefault('f'::"char", p.proowner)) AS acl
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = current_schema()
          AND (p.proname LIKE 'ai\_marking\_%' OR p.proname LIKE 'ai\_queue\_%'
               OR p.proname LIKE 'aiqueue\_%')
    LOOP
        FOR who IN
            SELECT a.grantee,
                   CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END AS role
            FROM aclexplode(obj.acl) a LEFT JOIN pg_roles r ON r.oid = a.grantee
            WHERE a.grantee <> obj.proowner AND a.grantee IS DISTINCT FROM runtime_oid
              AND (a.grantee = 0 OR r.oid IS NOT NULL)
        LOOP
            EXECUTE format('REVOKE ALL ON ROUTINE %s FROM %s CASCADE', obj.name, who.role);
        END LOOP;
        IF runtime IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM aclexplode(obj.acl) a WHERE a.grantee = runtime_oid) THEN
            EXECUTE format('GRANT EXECUTE ON ROUTINE %s TO %I', obj.name, runtime);
        END IF;
        -- A definer's rights with the caller's search_path run the caller's objects.
        IF obj.prosecdef AND NOT EXISTS (SELECT 1 FROM unnest(obj.proconfig) c
                                         WHERE c LIKE 'search\_path=%') THEN
            EXECUTE format('ALTER ROUTINE %s SET search_path = pg_catalog, %I, pg_temp',
                           obj.name, current_schema());
        END IF;
    END LOOP;

    IF runtime IS NOT NULL AND to_regclass('submissions') IS NOT NULL THEN
        IF NOT has_table_privilege(runtime_oid, 'submissions', 'SELECT') THEN
            EXECUTE format('GRANT SELECT ON submissions TO %I', runtime);
        END IF;
        IF NOT (has_column_privilege(runtime_oid, 'submissions', 'ai_result', 'UPDATE')
                AND has_column_privilege(runtime_oid, 'submissions', 'ai_marked_at', 'UPDATE')) THEN
            EXECUTE format('GRANT UPDATE (ai_result, ai_marked_at) ON submissions TO %I', runtime);
        END IF;
    END IF;
END
$lockdown$;
