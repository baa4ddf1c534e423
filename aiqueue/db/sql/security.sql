-- What the doctor reads of who may reach the queue, over the
-- same catalog selection as the lockdown (lockdown.sql, which says which objects
-- and roles count), and the shared login throttle.

-- queue_exposures --
-- Every way a role other than the owner and the runtime role reaches a queue
-- object: (role, object, kind, privilege).  PUBLIC counts as a role.
-- The platform's own roles (see platform_roles) and the predefined pg_* roles
-- are left out: they reach everything by design.  A member of the owner or the
-- runtime role is listed (it reaches what they reach).  Three rows name no
-- role ('*'): a table without row-level security, a view that runs with its
-- owner's rights, and a SECURITY DEFINER routine without a pinned
-- search_path.  `submissions` counts when migration 0001 created it.
-- Empty = locked down.
WITH runtime AS (
    SELECT (SELECT oid FROM pg_roles
            WHERE rolname = (SELECT value FROM aiqueue_meta WHERE key = 'runtime_role')) AS oid
),
objects AS (
    SELECT c.oid, c.relowner AS owner, c.relname::text AS object,
           CASE WHEN c.relkind = 'S' THEN 'sequence'
                WHEN c.relkind IN ('v', 'm') THEN 'view' ELSE 'table' END AS kind,
           c.relkind, c.relrowsecurity, c.reloptions, false AS secdef, NULL::text[] AS config
    FROM pg_class c
    WHERE c.relnamespace = current_schema()::regnamespace
      AND c.relkind IN ('r', 'p', 'f', 'v', 'm', 'S')
      AND (c.relname LIKE 'ai\_marking\_%' OR c.relname LIKE 'ai\_queue\_%'
           OR c.relname LIKE 'aiqueue\_%'
           OR (c.relname = 'submissions' AND EXISTS (
                   SELECT 1 FROM aiqueue_meta
                   WHERE key = 'created_submissions' AND value = 'true')))
    UNION ALL
    SELECT p.oid, p.proowner, p.oid::regprocedure::text, 'function', NULL, NULL, NULL,
           p.prosecdef, p.proconfig
    FROM pg_proc p
    WHERE p.pronamespace = current_schema()::regnamespace
      AND (p.proname LIKE 'ai\_marking\_%' OR p.proname LIKE 'ai\_queue\_%'
           OR p.proname LIKE 'aiqueue\_%')
),
roles AS (
    SELECT r.oid, r.rolname::text AS role FROM pg_roles r
    WHERE r.rolname NOT LIKE 'pg\_%'
      AND NOT (r.rolsuper OR (r.rolbypassrls AND EXISTS (
          SELECT 1 FROM pg_roles d
          WHERE d.rolname = 'pg_read_all_data' AND pg_has_role(r.oid, d.oid, 'MEMBER'))))
    UNION ALL
    SELECT 0, 'PUBLIC'
),
privileges (kind, privilege) AS (
    VALUES ('table', 'SELECT'), ('table', 'INSERT'), ('table', 'UPDATE'), ('table', 'DELETE'),
           ('table', 'TRUNCATE'), ('table', 'REFERENCES'), ('table', 'TRIGGER'),
           ('view', 'SELECT'), ('view', 'INSERT'), ('view', 'UPDATE'), ('view', 'DELETE'),
           ('sequence', 'USAGE'), ('sequence', 'SELECT'), ('sequence', 'UPDATE'),
           ('function', 'EXECUTE')
)
SELECT r.role, o.object, o.kind, p.privilege
FROM objects o
JOIN privileges p ON p.kind = o.kind
CROSS JOIN roles r
WHERE r.oid <> o.owner AND r.oid IS DISTINCT FROM (SELECT oid FROM runtime)
  AND CASE
      WHEN o.kind = 'function' THEN has_function_privilege(r.oid, o.oid, p.privilege)
      WHEN o.kind = 'sequence' THEN has_sequence_privilege(r.oid, o.oid, p.privilege)
      WHEN p.privilege IN ('SELECT', 'INSERT', 'UPDATE', 'REFERENCES')
          THEN has_any_column_privilege(r.oid, o.oid, p.privilege)
      ELSE has_table_privilege(r.oid, o.oid, p.privilege) END
UNION ALL
SELECT '*', o.object, o.kind,
       CASE WHEN o.kind = 'table' THEN 'ROW LEVEL SECURITY OFF'
            WHEN o.kind = 'view' THEN 'RUNS WITH OWNER RIGHTS'
            ELSE 'SEARCH_PATH NOT PINNED' END
FROM objects o
WHERE (o.relkind IN ('r', 'p') AND NOT o.relrowsecurity)
   OR (o.relkind = 'v' AND current_setting('server_version_num')::int >= 150000
       AND NOT coalesce('security_invoker=true' = ANY (o.reloptions), false))
   OR (o.secdef AND NOT EXISTS (SELECT 1 FROM unnest(o.config) c WHERE c LIKE 'search\_path=%'))
ORDER BY 1, 2, 4;

-- platform_roles --
-- The platform's own roles: a superuser, or a role with BYPASSRLS that is a
-- member of pg_read_all_data (Supabase's supabase_admin,
-- supabase_read_only_user, supabase_etl_admin).  No migration can lock them
-- out; the doctor names them as a note.  The predefined pg_* roles are left out.
SELECT r.rolname::text AS role, r.rolsuper AS superuser
FROM pg_roles r
WHERE r.rolname NOT LIKE 'pg\_%'
  AND (r.rolsuper OR (r.rolbypassrls AND EXISTS (
      SELECT 1 FROM pg_roles d
      WHERE d.rolname = 'pg_read_all_data' AND pg_has_role(r.oid, d.oid, 'MEMBER'))))
ORDER BY 1;

-- wide_members --
-- Roles (not the platform's own) that reach every table through a membership:
-- pg_read_all_data or pg_write_all_data (on Neon, through neon_superuser).  A
-- migration can't take that away; the lockdown check's fix says so.
SELECT r.rolname::text AS role
FROM pg_roles r
WHERE r.rolname NOT LIKE 'pg\_%' AND NOT r.rolsuper
  AND EXISTS (SELECT 1 FROM pg_roles d
              WHERE d.rolname IN ('pg_read_all_data', 'pg_write_all_data')
                AND pg_has_role(r.oid, d.oid, 'MEMBER'))
ORDER BY 1;

-- submissions_readers --
-- The host's own `submissions` (not one migration 0001 created, which
-- queue_exposures covers): every role but its owner, the runtime role and the
-- platform's own that can read its rows.  A role "can read" when it may SELECT
-- a column and either row-level security is off, or it bypasses it, or a
-- policy for SELECT applies to it (or to PUBLIC).  PUBLIC counts as a role.
WITH sub AS (
    SELECT c.oid, c.relowner, c.relrowsecurity FROM pg_class c
    WHERE c.oid = to_regclass('submissions')
      AND NOT EXISTS (SELECT 1 FROM aiqueue_meta
                      WHERE key = 'created_submissions' AND value = 'true')
),
runtime AS (
    SELECT (SELECT oid FROM pg_roles
            WHERE rolname = (SELECT value FROM aiqueue_meta WHERE key = 'runtime_role')) AS oid
),
roles AS (
    SELECT r.oid, r.rolname::text AS role, r.rolbypassrls AS bypass FROM pg_roles r
    WHERE r.rolname NOT LIKE 'pg\_%'
      AND NOT (r.rolsuper OR (r.rolbypassrls AND EXISTS (
          SELECT 1 FROM pg_roles d
          WHERE d.rolname = 'pg_read_all_data' AND pg_has_role(r.oid, d.oid, 'MEMBER'))))
    UNION ALL
    SELECT 0, 'PUBLIC', false
)
SELECT r.role, s.relrowsecurity AS row_security
FROM sub s CROSS JOIN roles r
WHERE r.oid <> s.relowner AND r.oid IS DISTINCT FROM (SELECT oid FROM runtime)
  AND has_any_column_privilege(r.oid, s.oid, 'SELECT')
  AND (NOT s.relrowsecurity OR r.bypass OR EXISTS (
      SELECT 1 FROM pg_policy p
      WHERE p.polrelid = s.oid AND p.polcmd IN ('r', '*') AND p.polpermissive
        AND (0 = ANY (p.polroles)
             OR EXISTS (SELECT 1 FROM unnest(p.polroles) pr
                        WHERE r.oid <> 0 AND pg_has_role(r.oid, pr, 'USAGE')))))
ORDER BY (r.oid <> 0), 1;

-- app_role --
-- The powers of the role this connection logs in as (docs/deploying/index.md): a
-- superuser, BYPASSRLS, and membership of the roles that read or write every
-- table; and whether it is the owner of the queue (or acts as the owner) or
-- the runtime role `migrate up --runtime-role` recorded.
SELECT current_user::text AS role, r.rolsuper AS superuser, r.rolbypassrls AS bypassrls,
       ARRAY(SELECT d.rolname::text FROM pg_roles d
             WHERE d.rolname IN ('pg_read_all_data', 'pg_write_all_data', 'neon_superuser')
               AND pg_has_role(r.oid, d.oid, 'MEMBER')
             ORDER BY 1) AS wide_roles,
       coalesce((SELECT pg_has_role(r.oid, c.relowner, 'USAGE') FROM pg_class c
                 WHERE c.oid = to_regclass('aiqueue_migrations')), false) AS owner,
       (SELECT o.rolname::text FROM pg_class c JOIN pg_roles o ON o.oid = c.relowner
        WHERE c.oid = to_regclass('aiqueue_migrations')) AS owner_role,
       (SELECT value FROM aiqueue_meta WHERE key = 'runtime_role') AS runtime_role
FROM pg_roles r
WHERE r.rolname = current_user;

-- login_blocked --
-- The /ai-queue login throttle (migration 0011), shared by every instance:
-- $1 the client's address, $2 the window in seconds, $3 the failures allowed.
SELECT count(*) >= $3 AS blocked
FROM ai_queue_login_failures
WHERE client = $1 AND failed_at > now() - make_interval(secs => $2);

-- login_failed --
-- Record one failed login; every failure older than the window is pruned on
-- the way, so the table never holds more than one window's failures.
WITH pruned AS (
    DELETE FROM ai_queue_login_failures WHERE failed_at <= now() - make_interval(secs => $2)
)
INSERT INTO ai_queue_login_failures (client) VALUES ($1);
