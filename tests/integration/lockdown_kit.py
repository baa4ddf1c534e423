"""What a role may do to the queue (the catalog's list, each statement run after SET ROLE),
and a host's own `ai*` objects that the migration must leave alone."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

QUEUE_RELATIONS = r"""
SELECT c.oid, c.relkind::text AS relkind, format('%I', c.relname) AS name,
       (SELECT format('%I', a.attname) FROM pg_attribute a
        WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
          AND a.attidentity = '' AND a.attgenerated = ''
        ORDER BY a.attnum LIMIT 1) AS first_column
FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace
  AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
  AND (c.relname LIKE 'ai\_marking\_%' OR c.relname LIKE 'ai\_queue\_%'
       OR c.relname LIKE 'aiqueue\_%'
       OR (c.relname = 'submissions' AND EXISTS (
               SELECT 1 FROM aiqueue_meta WHERE key = 'created_submissions')))
ORDER BY c.relname
"""
QUEUE_ROUTINES = r"""
SELECT p.oid, p.oid::regprocedure::text AS signature, p.prorettype = 'trigger'::regtype AS trigger,
       format('%s(%s)', p.oid::regproc,
              (SELECT string_agg('NULL::' || format_type(t, NULL), ', ')
               FROM unnest(p.proargtypes) t)) AS call
FROM pg_proc p
WHERE p.pronamespace = current_schema()::regnamespace
  AND (p.proname LIKE 'ai\_marking\_%' OR p.proname LIKE 'ai\_queue\_%'
       OR p.proname LIKE 'aiqueue\_%')
ORDER BY 2
"""


@dataclass
class Probe:
    """What one role could do to the queue: every statement that was not refused."""

    role: str
    allowed: list[str]


async def _refused(conn: asyncpg.Connection, role: str, statement: str) -> bool:
    """Run `statement` as `role` (rolled back whatever happens); True if privileges refused it.

    Any other error (a constraint, a NULL argument) came after the privilege
    check had let the statement through, so it counts as allowed.  `conn` must
    be a superuser's: a SET ROLE it may not do raises instead of counting as a
    refusal.
    """
    tr = conn.transaction()
    await tr.start()
    try:
        await conn.execute(f"SET LOCAL ROLE {role}")
        try:
            await conn.execute(statement)
        except asyncpg.InsufficientPrivilegeError:
            return True
        except asyncpg.PostgresError:
            return False
        return False
    finally:
        await tr.rollback()


async def probe(conn: asyncpg.Connection, role: str) -> Probe:
    """Read, write, truncate every queue relation and call every queue routine as `role`."""
    found = Probe(role, [])
    relations = await conn.fetch(QUEUE_RELATIONS)
    routines = await conn.fetch(QUEUE_ROUTINES)
    for rel in relations:
        name, col = rel["name"], rel["first_column"]
        if rel["relkind"] == "S":
            statements = [f"SELECT nextval('{name}')", f"SELECT * FROM {name}",
                          f"SELECT setval('{name}', 1)"]
        elif rel["relkind"] in ("v", "m"):
            # A view that can't be written fails in the rewriter, before any
            # privilege check: ask the catalog about writes, read it for real.
            statements = [f"SELECT * FROM {name} LIMIT 1"]
            for privilege in ("INSERT", "UPDATE", "DELETE"):
                if await conn.fetchval("SELECT has_table_privilege($1, $2::oid, $3)",
                                       role, rel["oid"], privilege):
                    found.allowed.append(f"{privilege} {name}")
        else:
            statements = [f"SELECT * FROM {name} LIMIT 1",
                          f"INSERT INTO {name} DEFAULT VALUES",
                          f"UPDATE {name} SET {col} = {col}", f"DELETE FROM {name}"]
            if rel["relkind"] in ("r", "p"):
                statements.append(f"TRUNCATE {name}")
        for statement in statements:
            if not await _refused(conn, role, statement):
                found.allowed.append(statement)
    for fn in routines:
        if await conn.fetchval("SELECT has_function_privilege($1, $2::oid, 'EXECUTE')",
                               role, fn["oid"]):
            found.allowed.append(f"EXECUTE {fn['signature']}")
        # A trigger function can't be called directly; the catalog check above covers it.
        if not fn["trigger"] and not await _refused(conn, role, f"SELECT {fn['call']}"):
            found.allowed.append(f"SELECT {fn['call']}")
    return found


# The host's own objects that merely start with `ai`: none is the queue's.
HOST_AI_OBJECTS = """
CREATE TABLE ai_prompts (id int PRIMARY KEY, prompt text);
INSERT INTO ai_prompts VALUES (1, 'Summarise the essay');
GRANT SELECT ON ai_prompts TO anon;
CREATE TABLE aimless (id int);
CREATE TABLE "aiXqueue_notes" (id int);
CREATE VIEW ai_prompt_list AS SELECT id FROM ai_prompts;
CREATE FUNCTION ai_summarise(t text) RETURNS text LANGUAGE sql SECURITY DEFINER
    AS 'SELECT left(t, 10)';
GRANT EXECUTE ON FUNCTION ai_summarise(text) TO PUBLIC;
CREATE TABLE host_before AS
    SELECT relname::text AS name, relacl::text AS acl, relrowsecurity AS rls,
           reloptions::text AS options
    FROM pg_class WHERE relname IN ('ai_prompts', 'aimless', 'aiXqueue_notes', 'ai_prompt_list')
    UNION ALL
    SELECT proname, proacl::text, prosecdef, proconfig::text FROM pg_proc
    WHERE proname = 'ai_summarise';
"""
HOST_NOW = """
SELECT relname::text AS name, relacl::text AS acl, relrowsecurity AS rls,
       reloptions::text AS options
FROM pg_class WHERE relname IN ('ai_prompts', 'aimless', 'aiXqueue_notes', 'ai_prompt_list')
UNION ALL
SELECT proname, proacl::text, prosecdef, proconfig::text FROM pg_proc
WHERE proname = 'ai_summarise'
ORDER BY 1
"""
