"""No trigger follows the queue's own status changes: the functions that move a row
write what follows it (db/sql/functions/74_moved.sql), no transaction flag steers
them, and one trigger follows a status set by host SQL."""

from __future__ import annotations

import re
from importlib import resources

import asyncpg

from aiqueue.db.store import Store
from aiqueue.models import Completed
from tests.conftest import add_submissions
from tests.plans import plan_of

# The columns ai_marking_ready mirrors (with status), by name.
READY_UPD = "UPDATE OF " + ", ".join(sorted(
    ["assignment_id", "status", "run_after", "priority", "group_key", "not_before", "seq",
     "kind", "pool", "lane", "expires_at", "leader_id", "turn", "run_kind"]))

# The triggers left on the queue table, each for a write host SQL can make itself
# (the file that creates it says why): inserts, deletes, a sooner run_after, a
# status set by hand (its WHEN leaves the queue's own moves out), and the ready
# table kept exact (35_ready.sql) whoever moves a row into or out of pending.
KEPT = {
    "ai_marking_queue_0_ready_ins": "INSERT",
    "ai_marking_queue_0_ready_upd": READY_UPD,
    "ai_marking_queue_events_ins": "INSERT",
    "ai_marking_queue_counts_ins": "INSERT",
    "ai_marking_queue_fair_ins": "INSERT",
    "ai_marking_queue_counts_del": "DELETE",
    "ai_marking_queue_group_erased": "DELETE",
    "ai_marking_queue_fair_sooner": "UPDATE OF run_after",
    "ai_marking_queue_host_moved": "UPDATE OF status",
    # In place of the ready, claimed and traces tables' keys to the record, which a
    # record partitioned by month cannot have (aiqueue 0078).
    "ai_marking_queue_0_gone": "DELETE",
    "ai_marking_queue_0_truncated": "TRUNCATE",
    # A status set by hand that moves a row between the live table and its month
    # fires no UPDATE row trigger (PostgreSQL deletes and inserts it): this follows it.
    "ai_marking_queue_0_crossed": "UPDATE",
}


async def test_the_queue_table_keeps_only_the_triggers_host_sql_needs(conn: asyncpg.Connection):
    rows = await conn.fetch(
        """SELECT t.tgname,
                  CASE WHEN t.tgtype & 4 <> 0 THEN 'INSERT'
                       WHEN t.tgtype & 8 <> 0 THEN 'DELETE'
                       WHEN t.tgtype & 32 <> 0 THEN 'TRUNCATE'
                       ELSE 'UPDATE' || coalesce(' OF ' || (
                           SELECT string_agg(a.attname, ', ' ORDER BY a.attname)
                           FROM pg_attribute a
                           WHERE a.attrelid = t.tgrelid AND a.attnum = ANY (t.tgattr)), '')
                  END AS fires_on
           FROM pg_trigger t
           WHERE t.tgrelid = 'ai_marking_queue'::regclass AND NOT t.tgisinternal""")
    assert {r["tgname"]: r["fires_on"] for r in rows} == KEPT


async def test_a_status_set_by_host_sql_is_followed_once_and_the_queues_moves_call_no_trigger(
        store: Store, conn: asyncpg.Connection):
    """A host's UPDATE of `status` gets the feed, the counts and the outbox (the one
    trigger kept for it); the queue's own moves bump `queue_moves` and write each once."""
    ids = await add_submissions(conn, 2, "hw-s")
    await store.enqueue(ids, "hw-s", 0, {})
    job = await store.claim(plan_of(0, 5))
    assert job is not None
    assert await conn.fetchval("SELECT queue_moves FROM ai_marking_queue WHERE queue_id = $1",
                               job.queue_id) == 1
    events = await conn.fetchval("SELECT count(*) FROM ai_marking_events")
    await conn.execute("UPDATE ai_marking_queue SET status = 'failed', last_error = 'x', "
                       "finished_at = now() WHERE status = 'pending'")
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_events") == events + 1
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_outbox WHERE type = 'marking.row_failed'") == 1
    await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                         plan_of())
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_events") == events + 2
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_outbox WHERE type = 'marking.run_finished'") == 1
    real = {r["status"]: r["n"] for r in await conn.fetch(
        "SELECT status, count(*) AS n FROM ai_marking_queue GROUP BY status")}
    counted = {r["status"]: r["n"] for r in await conn.fetch(
        "SELECT status, sum(n) AS n FROM ai_marking_counts GROUP BY status HAVING sum(n) <> 0")}
    assert counted == real == {"completed": 1, "failed": 1}


def test_no_sql_function_steers_another_by_a_transaction_flag():
    folder = resources.files("aiqueue.db.sql").joinpath("functions")
    text = "\n".join(f.read_text() for f in folder.iterdir() if f.name.endswith(".sql"))
    code = "\n".join(line.split("--")[0] for line in text.splitlines())
    assert re.findall(r"(?:set_config|current_setting)\('aiqueue\.", code) == []
