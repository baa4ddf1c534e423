"""No trigger follows a status change: the functions that move a row write what
follows it (db/sql/functions/74_moved.sql), and no transaction flag steers them."""

from __future__ import annotations

import re
from importlib import resources

import asyncpg

from aiqueue.db.store import Store
from tests.conftest import add_submissions

# The columns ai_marking_ready mirrors (with status), by name.
READY_UPD = "UPDATE OF " + ", ".join(sorted(
    ["assignment_id", "status", "run_after", "priority", "group_key", "not_before", "seq",
     "kind", "pool", "lane", "expires_at", "leader_id", "turn", "run_kind"]))

# The triggers left on the queue table, each for a write host SQL can make itself
# (the file that creates it says why): inserts, deletes, a sooner run_after, and
# the ready table kept exact (35_ready.sql) whoever moves a row into or out of pending.
KEPT = {
    "ai_marking_queue_0_ready_ins": "INSERT",
    "ai_marking_queue_0_ready_upd": READY_UPD,
    "ai_marking_queue_events_ins": "INSERT",
    "ai_marking_queue_counts_ins": "INSERT",
    "ai_marking_queue_fair_ins": "INSERT",
    "ai_marking_queue_counts_del": "DELETE",
    "ai_marking_queue_group_erased": "DELETE",
    "ai_marking_queue_fair_sooner": "UPDATE OF run_after",
}


async def test_the_queue_table_keeps_only_the_triggers_host_sql_needs(conn: asyncpg.Connection):
    rows = await conn.fetch(
        """SELECT t.tgname,
                  CASE WHEN t.tgtype & 4 <> 0 THEN 'INSERT'
                       WHEN t.tgtype & 8 <> 0 THEN 'DELETE'
                       ELSE 'UPDATE OF ' || (SELECT string_agg(a.attname, ', ' ORDER BY a.attname)
                                            FROM pg_attribute a
                                            WHERE a.attrelid = t.tgrelid
                                              AND a.attnum = ANY (t.tgattr)) END AS fires_on
           FROM pg_trigger t
           WHERE t.tgrelid = 'ai_marking_queue'::regclass AND NOT t.tgisinternal""")
    assert {r["tgname"]: r["fires_on"] for r in rows} == KEPT


async def test_a_status_update_by_itself_writes_nothing_else(store: Store,
                                                             conn: asyncpg.Connection):
    ids = await add_submissions(conn, 1, "hw-s")
    await store.enqueue(ids, "hw-s", 0, {})
    tables = ("ai_marking_events", "ai_marking_counts", "ai_marking_outbox", "ai_marking_fair")
    before = {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in tables}
    await conn.execute("UPDATE ai_marking_queue SET status = 'failed', finished_at = now()")
    await conn.execute("UPDATE ai_marking_queue SET status = 'pending', finished_at = NULL")
    after = {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in tables}
    assert after == before


def test_no_sql_function_steers_another_by_a_transaction_flag():
    folder = resources.files("aiqueue.db.sql").joinpath("functions")
    text = "\n".join(f.read_text() for f in folder.iterdir() if f.name.endswith(".sql"))
    code = "\n".join(line.split("--")[0] for line in text.splitlines())
    assert re.findall(r"(?:set_config|current_setting)\('aiqueue\.", code) == []
