"""Time end to end: `python -m aiqueue serve`, a marking function, a receiver.

- 1,000 rows scheduled over 60 s go out on time under serve's ticker, none early;
- rows that expire while the function refuses all work end `expired`, untouched;
- the function down, then back: one `stalled` opened, then one resolved, signed,
  each soon after its condition; a healthy run sends no alert.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.queue.hold import HOLD_WAIT_MAX_SECONDS
from tests.conftest import SECRET
from tests.e2e.receiver import Receiver, new_secret, serving
from tests.e2e.servers import AppProcess, Faults, FunctionHost, MarkingFunction, drain, free_port

# Timed end to end: one after another on one worker, never two of them at once.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("timed")]

AUTH = {"authorization": f"Bearer {SECRET}"}
KEY = new_secret()
# When the cron test's later rows are due: past every step's wait after the first ones.
LATER = 5 + HOLD_WAIT_MAX_SECONDS + 10


@pytest.fixture
def function() -> Iterator[FunctionHost]:
    host = FunctionHost(MarkingFunction(seed=3), free_port())
    host.up()
    yield host
    host.close()


def app_for(db_url: str, host: FunctionHost, receiver: Receiver | None = None,
            **env: str) -> AppProcess:
    notify = {"QUEUE_NOTIFY_URL": receiver.url, "QUEUE_NOTIFY_SECRET": KEY,
              "QUEUE_NOTIFY_RETRY_BASE_SECONDS": "0.1"} if receiver else {}
    return AppProcess({"DATABASE_URL": db_url, "MARKING_QUEUE_SECRET": SECRET,
                       "AI_MARKING_FUNCTION_URL": host.url, "QUEUE_MAX_IN_FLIGHT": "8",
                       **notify, **env}, free_port())


async def submissions(conn: asyncpg.Connection, n: int) -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in range(n)]
    # Each answer its own: the same answer would be marked once (same_answers).
    await conn.executemany("INSERT INTO submissions (id, assignment_id, content) "
                           "VALUES ($1, 'hw-t', $2)",
                           [(i, f"answer {k}") for k, i in enumerate(ids)])
    return ids


async def enqueue(client: httpx.AsyncClient, ids: list[uuid.UUID], **extra: Any) -> None:
    r = await client.post("/api/marking/enqueue", headers=AUTH, json={
        "assignment_id": "hw-t", "submission_ids": [str(i) for i in ids], **extra})
    assert r.status_code == 202, r.text


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def test_scheduled_rows_go_out_on_time_and_never_early(
        db_url: str, conn: asyncpg.Connection, function: FunctionHost):
    ids = await submissions(conn, 1000)
    app = app_for(db_url, function)  # serve's ticker (QUEUE_TICK_SECONDS 60) is the only cron
    await asyncio.to_thread(app.start)
    try:
        base = datetime.now(UTC) + timedelta(seconds=3)
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
            # 100 enqueues of 10 rows, their not_before 0.6 s apart: 60 s in all.
            for k in range(100):
                at = base + timedelta(seconds=0.6 * k)
                await enqueue(client, ids[10 * k:10 * k + 10], not_before=at.isoformat())
        await drain(conn, timeout=150)
    finally:
        await asyncio.to_thread(app.stop)
    rows = await conn.fetch(
        "SELECT q.status, q.not_before, min(a.started_at) AS first_dispatch "
        "FROM ai_marking_queue q JOIN ai_marking_attempts a "
        "  ON a.queue_id = q.queue_id AND a.kind = 'dispatch' "
        "GROUP BY q.queue_id, q.status, q.not_before")
    assert len(rows) == 1000 and {r["status"] for r in rows} == {"completed"}
    late = [(r["first_dispatch"] - r["not_before"]).total_seconds() for r in rows]
    assert min(late) >= 0, "a row was dispatched before its not_before"
    assert p99(late) <= 5.0, f"p99 lateness {p99(late):.2f} s"
    print(f"lateness p50 {sorted(late)[500]:.3f} s, p99 {p99(late):.3f} s, max {max(late):.3f} s")


async def test_with_only_a_per_minute_cron_scheduled_rows_are_at_most_65_s_late(
        db_url: str, conn: asyncpg.Connection, function: FunctionHost):
    ids = await submissions(conn, 200)
    # No ticker: only the chain, the steps' short waits and the cron (the test).
    app = app_for(db_url, function, QUEUE_TICK_SECONDS="0")
    await asyncio.to_thread(app.start)
    try:
        base = datetime.now(UTC) + timedelta(seconds=3)
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
            # 100 rows over the first 5 s, then a gap no step waits across
            # (HOLD_WAIT_MAX_SECONDS, with 10 s to spare), then 100 rows over 5 s.
            for k in range(20):
                for offset, part in ((0.25 * k, ids[5 * k:5 * k + 5]),
                                     (LATER + 0.25 * k, ids[100 + 5 * k:105 + 5 * k])):
                    at = base + timedelta(seconds=offset)
                    await enqueue(client, part, not_before=at.isoformat())
            r = await client.get("/api/marking/process-queue", headers=AUTH)
            assert r.status_code == 200
            # The next cron: after the later rows are due (at most a minute after).
            await asyncio.sleep((base - datetime.now(UTC)).total_seconds() + LATER + 6)
            cron_at = datetime.now(UTC)
            r = await client.get("/api/marking/process-queue", headers=AUTH)
            assert r.status_code == 200
        await drain(conn, timeout=60)
    finally:
        await asyncio.to_thread(app.stop)
    rows = await conn.fetch(
        "SELECT q.not_before, min(a.started_at) AS first_dispatch "
        "FROM ai_marking_queue q JOIN ai_marking_attempts a "
        "  ON a.queue_id = q.queue_id AND a.kind = 'dispatch' "
        "WHERE q.status = 'completed' GROUP BY q.queue_id, q.not_before")
    assert len(rows) == 200
    late = [(r["first_dispatch"] - r["not_before"]).total_seconds() for r in rows]
    assert min(late) >= 0 and max(late) <= 65, (min(late), max(late))
    # The later rows waited for the cron: no step waited across the gap for them.
    second = base + timedelta(seconds=LATER)
    later = [r["first_dispatch"] for r in rows if r["not_before"] >= second]
    assert len(later) == 100 and min(later) >= cron_at, (min(later), cron_at)
    print(f"cron only: lateness p50 {sorted(late)[100]:.3f} s, max {max(late):.3f} s")


async def test_rows_that_expire_while_the_function_refuses_work_end_expired(
        db_url: str, conn: asyncpg.Connection, function: FunctionHost):
    ids = await submissions(conn, 30)
    # The function is "down" as a gateway would say so: 429 to every dispatch, which
    # holds the queue and uses no attempt (docs/concepts.md).
    fn = function.function
    fn.faults = Faults(busy_429=1.0, busy_retry_after="1")
    app = app_for(db_url, function, QUEUE_TICK_SECONDS="0.5")
    await asyncio.to_thread(app.start)
    try:
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
            await enqueue(client, ids, expire_after_seconds=3)
        expires = await conn.fetchval("SELECT max(expires_at) FROM ai_marking_queue")
        await drain(conn, timeout=30)
        refused = fn.record.dispatches
        fn.faults = Faults()  # back up: nothing is left for it
        await asyncio.sleep(2)
    finally:
        await asyncio.to_thread(app.stop)
    rows = await conn.fetch("SELECT status, attempts FROM ai_marking_queue")
    assert {(r["status"], r["attempts"]) for r in rows} == {("expired", 0)}
    assert refused > 0, "the function was asked (and refused) before the rows expired"
    assert fn.record.dispatches == refused and not fn.record.seen_queue_ids
    late = await conn.fetchval("SELECT count(*) FROM ai_marking_attempts "
                               "WHERE kind = 'dispatch' AND started_at >= $1", expires)
    assert late == 0
    expired = await conn.fetchval("SELECT count(*) FROM ai_marking_outbox "
                                  "WHERE type = 'marking.row_expired'")
    assert expired == 30


def alerts(receiver: Receiver, kind: str) -> list[dict[str, Any]]:
    return [r.payload for r in receiver.received
            if r.payload is not None and r.payload["type"] == kind]


async def test_a_stall_opens_one_alert_and_its_end_resolves_it(
        db_url: str, conn: asyncpg.Connection, function: FunctionHost):
    ids = await submissions(conn, 40)
    with serving(Receiver(KEY)) as receiver:
        app = app_for(db_url, function, receiver, QUEUE_TICK_SECONDS="0.5",
                      QUEUE_MAX_ATTEMPTS="1000", QUEUE_RETRY_BASE_SECONDS="0.5",
                      QUEUE_RETRY_MAX_SECONDS="1", QUEUE_BREAKER_THRESHOLD="2",
                      QUEUE_BREAKER_COOLDOWN_SECONDS="1", QUEUE_ALERT_STALLED_SECONDS="3",
                      QUEUE_ALERT_BACKLOG_AGE_SECONDS="3600", QUEUE_ALERT_FAILURES_MIN="1000")
        await asyncio.to_thread(app.start)
        try:
            await asyncio.to_thread(function.down)
            down_at = time.monotonic()
            async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
                await enqueue(client, ids)
            await asyncio.to_thread(receiver.wait_for,
                                    lambda r: alerts(r, "marking.alert_opened"), 120)
            opened_after = time.monotonic() - down_at
            await asyncio.to_thread(function.up)
            up_at = time.monotonic()
            await asyncio.to_thread(receiver.wait_for,
                                    lambda r: alerts(r, "marking.alert_resolved"), 120)
            resolved_after = time.monotonic() - up_at
            await drain(conn, timeout=60)
            await asyncio.sleep(6)  # more evaluations: nothing repeats
        finally:
            await asyncio.to_thread(app.stop)
    # The condition began 3 s after the function went down (nothing taken since).
    assert opened_after - 3 <= 120 and resolved_after <= 120
    [opened] = alerts(receiver, "marking.alert_opened")
    [resolved] = alerts(receiver, "marking.alert_resolved")
    assert opened["alert"] == resolved["alert"] == "stalled"
    assert (opened["pool"], opened["kind"], opened["threshold"]) == ("default", None, 3)
    assert resolved["opened_at"] == opened["opened_at"]
    assert all(r.payload is not None for r in receiver.received), "every signature verified"
    print(f"stalled opened {opened_after:.1f} s after the outage began, "
          f"resolved {resolved_after:.1f} s after it ended")


async def test_a_healthy_run_sends_no_alert(
        db_url: str, conn: asyncpg.Connection, function: FunctionHost):
    ids = await submissions(conn, 300)
    with serving(Receiver(KEY)) as receiver:
        app = app_for(db_url, function, receiver, QUEUE_TICK_SECONDS="0.5",
                      QUEUE_ALERT_STALLED_SECONDS="3", QUEUE_ALERT_BACKLOG_AGE_SECONDS="60",
                      QUEUE_ALERT_FAILURES_MIN="1", QUEUE_ALERT_FAILURE_RATE="0.01")
        await asyncio.to_thread(app.start)
        try:
            async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
                await enqueue(client, ids)
            await drain(conn, timeout=90)
            # (wait_for holds the receiver's lock: the predicate reads without it.)
            await asyncio.to_thread(receiver.wait_for,
                                    lambda r: alerts(r, "marking.run_finished"), 30)
            await asyncio.sleep(6)  # a last evaluation or two after the run
        finally:
            await asyncio.to_thread(app.stop)
    types = [p["type"] for p in receiver.delivered().values()]
    assert types == ["marking.run_finished"]
    assert await conn.fetchval("SELECT count(*) FROM ai_queue_alerts") == 0
