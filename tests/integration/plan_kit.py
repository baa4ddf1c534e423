"""EXPLAIN of the queries the SQL functions hold, as they hold them: the index tests' tool."""

from __future__ import annotations

import re

import asyncpg

# plan_in_function's values for the group variables of aiqueue_fair_pick (g.*) and of
# its helpers (p_*).
GROUP_VALUES = {"g.pool": "'default'", "g.priority": "0", "g.group_key": "'hw-1'",
                "p_pool": "'default'", "p_priority": "0", "p_group": "'hw-1'",
                "kinds": "NULL::text[]"}


async def plan_in_function(conn: asyncpg.Connection, function: str, pattern: str,
                           cursor: bool = False, /, **values: str) -> str:
    """EXPLAIN of a query exactly as a plpgsql function holds it (`values` fill its variables)."""
    source = await conn.fetchval("SELECT prosrc FROM pg_proc WHERE proname = $1", function)
    match = re.search(f"({pattern})", source, re.DOTALL)
    assert match, source
    query = match.group(1)
    for name, value in values.items():
        query = re.sub(rf"\b{re.escape(name)}\b", value, query)
    query = re.sub(r"\bINTO \w+\b", "", query)  # plpgsql's SELECT … INTO target
    if cursor:
        # A plpgsql FOR loop reads its query through a cursor, planned for its
        # first rows (cursor_tuple_fraction).
        async with conn.transaction():
            rows = await conn.fetch("EXPLAIN DECLARE walk NO SCROLL CURSOR FOR " + query)
    else:
        rows = await conn.fetch("EXPLAIN " + query)
    return "\n".join(r[0] for r in rows)


async def generic_plan_in_function(conn: asyncpg.Connection, function: str, pattern: str,
                                   /, **params: str) -> str:
    """EXPLAIN of a query a plpgsql function holds, as its generic plan: each of `params`
    (a variable and its type) a parameter, as a function run with force_generic_plan has it."""
    source = await conn.fetchval("SELECT prosrc FROM pg_proc WHERE proname = $1", function)
    match = re.search(f"({pattern})", source, re.DOTALL)
    assert match, source
    query = re.sub(r"\bINTO \w+\b", "", match.group(1))
    for n, name in enumerate(params, 1):
        query = re.sub(rf"\b{re.escape(name)}\b", f"${n}", query)
    async with conn.transaction():
        await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        await conn.execute(f"PREPARE generic ({', '.join(params.values())}) AS {query}")
        nulls = ", ".join("NULL" for _ in params)
        rows = await conn.fetch(f"EXPLAIN EXECUTE generic ({nulls})")
        await conn.execute("DEALLOCATE generic")
    return "\n".join(r[0] for r in rows)
