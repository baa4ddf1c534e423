"""EXPLAIN of the queries the SQL functions hold, as they hold them: the index tests' tool."""

from __future__ import annotations

import re
from typing import Any

import asyncpg

# plan_in_function's values for the group variables of aiqueue_fair_pick (g.*) and of
# its helpers (p_*).
GROUP_VALUES = {"g.pool": "'default'", "g.priority": "0", "g.group_key": "'hw-1'",
                "p_pool": "'default'", "p_priority": "0", "p_group": "'hw-1'",
                "kinds": "NULL::text[]"}


# The record is partitioned by month (aiqueue 0078): a plan reads each month in a node of
# its own.  A month without a page (the planner's cost 0: it knows it empty) costs nothing
# however it is read.
_SEQ_SCAN = re.compile(r"Seq Scan on (\w+)(?: \w+)?\s+\(cost=[\d.]+\.\.([\d.]+)")


def seq_scans(text: str) -> list[str]:
    """The tables an EXPLAIN text reads by a Seq Scan, but an empty month of the record."""
    return [table for table, cost in _SEQ_SCAN.findall(text)
            if not (table.startswith("ai_marking_queue") and float(cost) == 0)]


def seq_scans_the_record(text: str) -> bool:
    """Whether an EXPLAIN text reads a month of the record that has rows by a Seq Scan."""
    return any(t.startswith("ai_marking_queue") for t in seq_scans(text))


def reads_pages(node: dict[str, Any]) -> bool:
    """Whether a JSON plan node reads pages: a month known to be empty costs 0."""
    return float(node.get("Total Cost", 1)) > 0


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
