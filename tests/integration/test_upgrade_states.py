"""The state-tables migrations (0040 on) move a live database and back: rows in every
state (pending, held for each reason, processing, in a batch, ended) keep every column
up and down (docs/architecture.md)."""

from __future__ import annotations

import json
import uuid

import asyncpg
import pytest

from aiqueue.db.migrate import discover, migrate
from aiqueue.db.store import Store, connect_pool
from tests.plans import plan_of

# The test migrates its database down and up: a new copy.
pytestmark = pytest.mark.fresh_db

FIRST = "0040"  # the first migration of the state tables

# One queue row per state, as the schema before FIRST holds them: its columns.
ROWS: dict[str, dict[str, object]] = {
    "pending": {"status": "pending"},
    "pending, scheduled (not_before)": {"status": "pending",
                                        "not_before": "2999-01-01T00:00:00+00"},
    "pending, expiring": {"status": "pending", "expires_at": "2999-01-01T00:00:00+00"},
    "pending, retry backoff": {"status": "pending", "attempts": 1,
                               "run_after": "2999-01-01T00:00:00+00"},
    "held for calibration": {"status": "pending", "calibration": False,
                             "held_run_after": "2026-01-01T00:00:00+00",
                             "run_after": "infinity"},
    "calibration row": {"status": "pending", "calibration": True},
    "batch lane, waiting for a batch": {"status": "pending", "lane": "batch",
                                        "run_after": "2999-01-01T00:00:00+00",
                                        "deadline": "2999-01-02T00:00:00+00"},
    "same-answer leader": {"status": "pending", "answer_key": "\\x01", "group_key": "g"},
    "same-answer follower": {"status": "pending", "answer_key": "\\x01", "group_key": "g",
                             "leader": "same-answer leader"},
    "fallback kind away": {"status": "pending", "run_kind": "mark-small"},
    "processing": {"status": "processing", "attempts": 1, "dispatch_seq": 1,
                   "started_at": "2026-01-01T00:00:00+00",
                   "lease_at": "2026-01-01T00:05:00+00", "progress": {"pct": 10}},
    "processing, in a batch": {"status": "processing", "lane": "batch", "attempts": 1,
                               "dispatch_seq": 1, "started_at": "2026-01-01T00:00:00+00",
                               "lease_at": "2026-01-02T00:00:00+00", "batch": True},
    "completed": {"status": "completed", "attempts": 1, "dispatch_seq": 1,
                  "started_at": "2026-01-01T00:00:00+00",
                  "finished_at": "2026-01-01T00:01:00+00",
                  "usage": {"model": "m", "prompt_tokens": 5}, "charged_usd": 0.5},
    "completed, late slot kept": {"status": "completed", "attempts": 2, "dispatch_seq": 2,
                                  "started_at": "2026-01-01T00:00:00+00",
                                  "lease_at": "2026-01-01T00:05:00+00",
                                  "finished_at": "2026-01-01T00:01:00+00"},
    "failed": {"status": "failed", "attempts": 3, "last_error": "boom",
               "finished_at": "2026-01-01T00:01:00+00"},
    "cancelled": {"status": "cancelled", "finished_at": "2026-01-01T00:01:00+00"},
    "cancelled by hand, no end time": {"status": "cancelled"},
    "expired": {"status": "expired", "expires_at": "2026-01-01T00:00:00+00",
                "finished_at": "2026-01-01T00:01:00+00"},
}

# What the test compares: every table a state moves a row through, each row whole.
TABLES = {"ai_marking_queue": "queue_id", "ai_marking_attempts": "id",
          "ai_marking_results": "queue_id", "ai_marking_batches": "id",
          "submissions": "id", "ai_marking_fair": "group_key"}


async def _fill(conn: asyncpg.Connection) -> None:
    """Rows in every state, written as the schema before FIRST holds them (the rules'
    triggers off: these are the rows a live database has, not moves being made)."""
    await conn.execute("SET session_replication_role = replica")
    batch = await conn.fetchval(
        "INSERT INTO ai_marking_batches (provider, model, state, rows) "
        "VALUES ('openai', 'm', 'submitted', 1) RETURNING id")
    ids: dict[str, uuid.UUID] = {}
    run = uuid.uuid4()
    for n, (name, spec) in enumerate(ROWS.items()):
        spec = dict(spec)
        sub = await conn.fetchval(
            "INSERT INTO submissions (assignment_id, content) VALUES ('hw', $1) RETURNING id",
            f"answer {n}")
        qid = uuid.uuid4()
        ids[name] = qid
        leader = spec.pop("leader", None)
        in_batch = spec.pop("batch", False)
        cols = {"queue_id": qid, "submission_id": sub, "assignment_id": "hw", "run_id": run,
                "priority": n % 3, "turn": n, **spec}
        if leader:
            cols["leader_id"] = ids[str(leader)]
        if in_batch:
            cols["batch_id"] = batch
        for key in ("progress", "usage"):
            if key in cols:
                cols[key] = json.dumps(cols[key])
        names = ", ".join(cols)
        values = ", ".join(f"${i}::text::{_cast(k)}" for i, k in enumerate(cols, 1))
        await conn.execute(f"INSERT INTO ai_marking_queue ({names}) VALUES ({values})",
                           *[str(v) for v in cols.values()])
        if cols.get("dispatch_seq"):
            await conn.execute(
                "INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt, kind, "
                "taken_by, ended_at, outcome) "
                "VALUES ($1, $2, $3, 'dispatch', $4, $5::text::timestamptz, $6)",
                qid, cols["dispatch_seq"], cols.get("attempts", 1), uuid.uuid4(),
                None if cols["status"] == "processing" else cols.get("finished_at"),
                "completed" if cols["status"] == "completed" else None)
        if cols["status"] == "completed":
            await conn.execute(
                "INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, "
                "run_id, result) VALUES ($1, $2, 'hw', $3, '{\"score\": 1}')", qid, sub, run)
    # A settle's hand-off: the completed row's line, which started first, claimed the
    # processing row next (whose line names no handing row before 0076).
    await conn.execute(
        "UPDATE ai_marking_attempts SET next_queue_id = $1, next_seq = 1,"
        " started_at = started_at - interval '1 minute' WHERE queue_id = $2",
        ids["processing"], ids["completed"])
    # Two groups' turn counters, one waiting (the walk key of 0060 starts at each).
    await conn.execute(
        "INSERT INTO ai_marking_fair (pool, priority, group_key, counter, waiting, head_turn,"
        " head_seq) VALUES ('default', 0, 'g', 1234.5, true, 3, 7),"
        " ('default', 0, 'hw', 99, false, 1, 2)")
    await conn.execute("RESET session_replication_role")


_TYPES = {"queue_id": "uuid", "submission_id": "uuid", "run_id": "uuid", "leader_id": "uuid",
          "priority": "integer", "turn": "bigint", "attempts": "integer",
          "dispatch_seq": "integer", "batch_id": "bigint", "calibration": "boolean",
          "charged_usd": "float8", "answer_key": "bytea", "progress": "jsonb",
          "usage": "jsonb"}


def _cast(column: str) -> str:
    if column.endswith(("_at", "_after", "not_before", "deadline")):
        return "timestamptz"
    return _TYPES.get(column, "text")


async def _snapshot(conn: asyncpg.Connection, columns: dict[str, list[str]] | None = None
                    ) -> dict[str, list[dict[str, object]]]:
    """Every row of TABLES as JSON (only `columns` of each, when given), in key order."""
    out = {}
    moved = await conn.fetchval("SELECT to_regclass('ai_marking_claimed') IS NOT NULL")
    for table, key in TABLES.items():
        query = f"SELECT to_jsonb(t) AS j FROM {table} t ORDER BY {key}"
        if table == "ai_marking_queue" and moved:
            # A row's lease lives with its slot (ai_marking_claimed, 0041).
            query = ("SELECT to_jsonb(t) || jsonb_build_object('lease_at', c.lease_at) AS j"
                     " FROM ai_marking_queue t"
                     " LEFT JOIN ai_marking_claimed c ON c.queue_id = t.queue_id"
                     " ORDER BY t.queue_id")
        rows = await conn.fetch(query)
        docs = [json.loads(r["j"]) for r in rows]
        if columns:
            docs = [{c: d.get(c) for c in columns[table]} for d in docs]
        out[table] = docs
    return out


async def _ready_is_pending(conn: asyncpg.Connection) -> None:
    """ai_marking_ready (0067) holds exactly the pending rows, with their columns."""
    ready = await conn.fetch(
        "SELECT queue_id, pool, priority, grp, kind, turn, seq, run_after, lane, not_before,"
        " expires_at, leader_id, run_kind FROM ai_marking_ready ORDER BY 1")
    pending = await conn.fetch(
        "SELECT queue_id, pool, priority, coalesce(group_key, assignment_id), kind, turn, seq,"
        " run_after, lane, not_before, expires_at, leader_id, run_kind FROM ai_marking_queue"
        " WHERE status = 'pending' ORDER BY 1")
    assert [tuple(r) for r in ready] == [tuple(r) for r in pending]
    assert len(ready) == sum(1 for spec in ROWS.values() if spec["status"] == "pending")


async def test_every_state_survives_the_upgrade_and_the_way_back(
        db_url: str, conn: asyncpg.Connection):
    later = [m.version for m in discover() if m.version >= FIRST]
    assert later, "no state-table migration"
    assert await migrate(db_url, "down", steps=len(later)) == later[::-1]
    await _fill(conn)
    before = await _snapshot(conn)
    columns = {t: list(rows[0]) for t, rows in before.items()}
    assert {r["status"] for r in before["ai_marking_queue"]} == {
        "pending", "processing", "completed", "failed", "cancelled", "expired"}
    assert len(before["ai_marking_queue"]) == len(ROWS)

    assert await migrate(db_url, "up") == later
    assert await _snapshot(conn, columns) == before
    await _ready_is_pending(conn)
    # The live rows in the record's live table, every other in its ended months (0078).
    parts = {r["status"]: r["part"] for r in await conn.fetch(
        "SELECT DISTINCT status, tableoid::regclass::text LIKE 'ai_marking_queue_live' AS part"
        " FROM ai_marking_queue")}
    assert parts == {"pending": True, "processing": True, "completed": False, "failed": False,
                     "cancelled": False, "expired": False}
    await _untimed_keeps_its_month(conn)
    keys = await conn.fetch("SELECT walk_key, walk_turn, walk_seq FROM ai_marking_fair"
                            " ORDER BY group_key")
    assert [tuple(k) for k in keys] == [(1234.5, 3, 7), (99, 1, 2)]
    # A slot for each row that held a lease: the rows in flight, and the completed
    # row whose newer dispatch is still out; none for a row in a batch.
    slots = await conn.fetch("SELECT queue_id, dispatch_seq, pool, kind FROM ai_marking_claimed")
    leased = [r for r in before["ai_marking_queue"] if r["lease_at"] is not None]
    assert sorted((str(r["queue_id"]), r["dispatch_seq"], r["pool"], r["kind"])
                  for r in slots) == sorted(
        (r["queue_id"], r["dispatch_seq"], r["pool"], r["kind"]) for r in leased)
    # Each of them holds a slot of its pool and of its kind (0077), numbered from 1.
    for kind in ("''", "coalesce(c.run_kind, c.kind)"):
        held = await conn.fetch(
            "SELECT s.n FROM ai_marking_claimed c JOIN ai_marking_slots s"
            " ON s.queue_id = c.queue_id AND s.dispatch_seq = c.dispatch_seq"
            f" AND s.pool = c.pool AND s.kind = {kind} ORDER BY s.n")
        assert [r["n"] for r in held] == list(range(1, len(leased) + 1))
    # The lists read the rows where the state tables put them: each state, whole.
    for status in ("pending", "processing", "completed", "failed", "cancelled", "expired"):
        listed = await conn.fetch(
            "SELECT queue_id FROM aiqueue_page_older($1, NULL, NULL, NULL, NULL, NULL, 100)",
            status)
        assert sorted(r["queue_id"] for r in listed) == sorted(
            uuid.UUID(str(r["queue_id"])) for r in before["ai_marking_queue"]
            if r["status"] == status)

    assert await migrate(db_url, "down", steps=len(later)) == later[::-1]
    assert await _snapshot(conn, columns) == before
    assert await conn.fetchval("SELECT to_regclass('ai_marking_slots')") is None
    assert await migrate(db_url, "up") == later
    assert await _snapshot(conn, columns) == before
    await _ready_is_pending(conn)
    # The slots hold the caps: with as many rows in flight as the pool's cap, no
    # claim; one more slot, one claim.  (The rows were written with the rules
    # off: their groups join their turns first.)  Rolled back: the erasure below
    # reads the rows as the upgrade left them.
    claims = conn.transaction()
    await claims.start()
    await conn.execute("SELECT aiqueue_fair_join_ids(array_agg(queue_id)) FROM ai_marking_queue"
                       " WHERE status = 'pending'")
    plan = plan_of(len(leased), 5).json
    assert await conn.fetchrow("SELECT * FROM aiqueue_claim($1::jsonb)", plan) is None
    plan = plan_of(len(leased) + 1, 5).json
    assert (await conn.fetchrow("SELECT * FROM aiqueue_claim($1::jsonb)", plan))["queue_id"]
    await claims.rollback()
    await _erase_after_upgrade(conn, db_url)


async def _untimed_keeps_its_month(conn: asyncpg.Connection) -> None:
    """An ended row with no end time keeps its month from the month's drop (0079): its
    period cannot be told.  Every other row of that month is past a period of 1 s."""
    part = await conn.fetchval("SELECT tableoid::regclass::text FROM ai_marking_queue"
                               " WHERE status = 'cancelled' AND finished_at IS NULL")
    kept = "SELECT aiqueue_record_month_kept($1::regclass, 1, 1)"
    assert await conn.fetchval(kept, part)
    tr = conn.transaction()
    await tr.start()
    await conn.execute("UPDATE ai_marking_queue SET finished_at = '2026-01-01T00:02:00+00'"
                       " WHERE status = 'cancelled' AND finished_at IS NULL")
    assert not await conn.fetchval(kept, part)
    await tr.rollback()


async def _erase_after_upgrade(conn: asyncpg.Connection, db_url: str) -> None:
    """Lines from before 0076 name no handing row (handed_by); erasing the row a
    settle handed out still clears the link to it (sql/erasure.sql)."""
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_attempts WHERE handed_by IS NOT NULL") == 0
    handed, sub = await conn.fetchrow(
        "SELECT queue_id, submission_id FROM ai_marking_queue WHERE status = 'processing'"
        " AND lane = 'live'")
    links = "SELECT count(*) FROM ai_marking_attempts WHERE next_queue_id = $1"
    assert await conn.fetchval(links, handed) == 1
    store = Store(await connect_pool(db_url, max_size=1))
    try:
        await store.erase([sub], "cli")
    finally:
        await store.close()
    assert await conn.fetchval(links, handed) == 0
