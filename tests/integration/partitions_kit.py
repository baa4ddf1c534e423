"""What the month partitions' tests share: rows with their history, months made and
placed (docs/operating/data-protection.md)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from aiqueue.db.migrate import discover
from aiqueue.db.store import Store
from aiqueue.models import Completed
from aiqueue.models.queue import QueueId
from tests.conftest import add_submissions
from tests.plans import plan_of

PARENTS = ("ai_marking_attempts", "ai_marking_results", "ai_marking_events")
DAY = 86400.0
ENDED, HISTORY = 30 * DAY, 365 * DAY


async def ended_rows(store: Store, conn: asyncpg.Connection, n: int,
                     status: str = "completed") -> list[QueueId]:
    """n completed rows, each with its attempt line and result."""
    assert status == "completed"
    assignment = f"hw-{uuid.uuid4().hex[:6]}"
    ids = await add_submissions(conn, n, assignment)
    await store.enqueue(ids, assignment, 0, {})
    qids = []
    for _ in ids:
        job = await store.claim(plan_of(0, 5))
        assert job is not None
        await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                             plan_of())
        qids.append(job.queue_id)
    return qids


def month_start(at: datetime) -> datetime:
    return at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


async def partitions(conn: asyncpg.Connection, parent: str) -> dict[str, tuple[object, object]]:
    rows = await conn.fetch("SELECT name, lower_bound, upper_bound FROM aiqueue_partitions() "
                            "WHERE parent = $1::regclass", parent)
    return {r["name"]: (r["lower_bound"], r["upper_bound"]) for r in rows}


async def without_upgrade_partition(conn: asyncpg.Connection) -> None:
    """Drop the (empty) partition of everything before next month that the upgrade made,
    so that past months can be made one by one."""
    for parent in PARENTS:
        for name, (lower, _) in (await partitions(conn, parent)).items():
            if lower is None and not name.endswith("_default"):
                await conn.execute(f"ALTER TABLE {parent} DETACH PARTITION {name}")
                await conn.execute(f"DROP TABLE {name}")


async def add_month(conn: asyncpg.Connection, parent: str, at: datetime) -> bool:
    key, unique = {"ai_marking_attempts": ("started_at", "id"),
                   "ai_marking_results": ("applied_at", "queue_id"),
                   "ai_marking_events": ("created_at", "id")}[parent]
    return bool(await conn.fetchval(
        "SELECT aiqueue_partition_add($1::regclass, $2, $3, $4::timestamp)",
        parent, key, unique, month_start(at).replace(tzinfo=None)))


async def place(conn: asyncpg.Connection, qids: Sequence[uuid.UUID], at: datetime) -> None:
    """Give these rows' attempts and results the time `at` (they move to its partition)."""
    await conn.execute("UPDATE ai_marking_attempts SET started_at = $2 WHERE queue_id = ANY($1)",
                       list(qids), at)
    await conn.execute("UPDATE ai_marking_results SET applied_at = $2 WHERE queue_id = ANY($1)",
                       list(qids), at)


async def where(conn: asyncpg.Connection, table: str, qids: Sequence[uuid.UUID]) -> set[str]:
    rows = await conn.fetch(f"SELECT DISTINCT tableoid::regclass::text AS part FROM {table} "
                            "WHERE queue_id = ANY($1)", list(qids))
    return {r["part"] for r in rows}


# The record's months (aiqueue 0078): the periods its tests keep rows for, months made,
# rows written by host SQL.
COMPLETED = 7 * DAY


async def record_month(conn: asyncpg.Connection, at: datetime) -> str:
    assert await conn.fetchval(
        "SELECT aiqueue_partition_add('ai_marking_queue_ended'::regclass, 'created_at',"
        " 'queue_id', $1::timestamp)", month_start(at).replace(tzinfo=None))
    return f"ai_marking_queue_ended_m{at:%Y%m}"


async def rows_made(conn: asyncpg.Connection, status: str, created: datetime,
                    finished: datetime | None, n: int = 2) -> list[uuid.UUID]:
    """Rows written by host SQL at `created`, each with an attempt line and a trace."""
    ids = await add_submissions(conn, n, f"hw-{uuid.uuid4().hex[:6]}")
    qids = [r[0] for r in await conn.fetch(
        "INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status, created_at,"
        " updated_at, finished_at) SELECT s.id, s.assignment_id, gen_random_uuid(), $2, $3, $3,"
        " $4 FROM submissions s WHERE s.id = ANY($1) RETURNING queue_id",
        ids, status, created, finished)]
    await conn.execute("INSERT INTO ai_marking_attempts (queue_id, started_at)"
                       " SELECT unnest($1::uuid[]), $2", qids, created)
    await conn.execute("INSERT INTO ai_marking_traces (queue_id, traceparent, kind, pool)"
                       " SELECT unnest($1::uuid[]), '00-x-y-01', 'mark', 'default'", qids)
    return qids


async def keep(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval(
        "SELECT dropped FROM aiqueue_keep_partitions($1, 0, 86400, 1, $2, $3)",
        HISTORY, COMPLETED, ENDED))


async def counted_as_held(conn: asyncpg.Connection) -> None:
    """The stats' counts (the deltas summed) are the rows the record holds."""
    counted = dict(await conn.fetch("SELECT status, sum(n)::bigint FROM ai_marking_counts"
                                    " GROUP BY status HAVING sum(n) <> 0"))
    held = dict(await conn.fetch("SELECT status, count(*) FROM ai_marking_queue GROUP BY status"))
    assert counted == held


async def without_record_upgrade_partition(conn: asyncpg.Connection) -> None:
    for name, (lower, _) in (await partitions(conn, "ai_marking_queue_ended")).items():
        if lower is None and not name.endswith("_default"):
            await conn.execute(f"ALTER TABLE ai_marking_queue_ended DETACH PARTITION {name}")
            await conn.execute(f"DROP TABLE {name}")


async def heard_while_migrating(conn: asyncpg.Connection, since: str) -> list[str]:
    """What PostgreSQL says (at debug1: each ATTACH's check, each index built) while the
    up SQL of the migrations from `since` on runs, in a transaction rolled back."""
    heard: list[str] = []

    def listen(_conn: object, message: asyncpg.PostgresLogMessage) -> None:
        heard.append(message.message)

    conn.add_log_listener(listen)
    tr = conn.transaction()
    await tr.start()
    try:
        await conn.execute("SET LOCAL client_min_messages = debug1")
        for m in discover():
            if m.version >= since:
                await conn.execute(m.up.read_text())
    finally:
        await tr.rollback()
        conn.remove_log_listener(listen)
    return heard
