"""Time (docs/operating/alerts.md) against a real PostgreSQL: scheduled rows, expiry, alerts.

The store's own statements drive the queue; where time matters the alert
evaluation is given a later moment (`at`) instead of the test waiting for it.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed
from tests.conftest import add_submissions
from tests.plans import plan_of

CAP, THRESHOLD = 0, 5
ALERT_KEYS = {"type", "alert", "pool", "kind", "value", "threshold", "opened_at"}
# Thresholds that never fire, for the alerts a test is not about.
NEVER = 10**9


def now() -> datetime:
    return datetime.now(UTC)


async def events(conn: asyncpg.Connection, kind: str) -> list[dict[str, Any]]:
    rows = await conn.fetch("SELECT body::text AS body FROM ai_marking_outbox "
                            "WHERE type = $1 ORDER BY created_at, id", kind)
    return [json.loads(r["body"]) for r in rows]


async def evaluate(store: Store, *, at: datetime | None = None, backlog: float = NEVER,
                   stalled: float = NEVER, failures_min: int = NEVER,
                   rate: float = 1.0) -> list[tuple[str, str]]:
    return await store.evaluate_alerts(backlog=backlog, stalled=stalled,
                                       failures_min=failures_min, failure_rate=rate, at=at)


# -- scheduled rows ----------------------------------------------------------


async def test_a_scheduled_row_is_pending_but_not_claimed_nor_backlog(
        store: Store, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 2, "hw-s")
    await store.enqueue(ids[:1], "hw-s", 0, {}, not_before=now() + timedelta(hours=1))
    assert await store.claim(plan_of(CAP, THRESHOLD)) is None
    stats = await store.stats()
    assert (stats.pending, stats.scheduled, stats.oldest_pending_seconds) == (1, 1, None)
    progress = await store.run_progress("hw-s")
    assert progress.scheduled == 1 and progress.scheduled_for is not None
    [row] = await store.list_rows(status="pending", assignment_id="hw-s", limit=5)
    assert row.not_before is not None and row.scheduled_for(now()) == row.not_before
    # A row enqueued without a time beside it goes at once.
    await store.enqueue(ids[1:], "hw-s", 0, {})
    job = await store.claim(plan_of(CAP, THRESHOLD))
    assert job is not None and job.submission_id == ids[1]


async def test_a_scheduled_row_is_claimed_once_its_time_has_come(
        store: Store, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 1, "hw-s")
    at = now() + timedelta(seconds=0.5)
    await store.enqueue(ids, "hw-s", 0, {}, not_before=at)
    assert await store.claim(plan_of(CAP, THRESHOLD)) is None
    wait = await store.next_scheduled()
    assert wait is not None and 0 < wait <= 0.5
    await asyncio.sleep(wait + 0.05)
    assert await store.claim(plan_of(CAP, THRESHOLD)) is not None
    started = await conn.fetchval("SELECT started_at FROM ai_marking_queue")
    assert started >= at


# -- expiry ------------------------------------------------------------------


async def test_rows_that_expire_undispatched_end_expired_with_no_attempt(
        store: Store, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 3, "hw-x")
    await store.enqueue(ids, "hw-x", 0, {}, expires_at=now() + timedelta(seconds=0.3))
    await asyncio.sleep(0.4)
    # Before any sweep the claim already refuses them.
    assert await store.claim(plan_of(CAP, THRESHOLD)) is None
    assert await store.expire_rows() == 3
    rows = await conn.fetch("SELECT status, attempts, last_error FROM ai_marking_queue")
    assert {(r["status"], r["attempts"], r["last_error"]) for r in rows} == {
        ("expired", 0, "expired")}
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_attempts "
                               "WHERE kind = 'dispatch'") == 0
    expired = await events(conn, "marking.row_expired")
    assert sorted(e["submission_id"] for e in expired) == sorted(map(str, ids))
    assert {e["error"] for e in expired} == {"expired"}
    [run] = await events(conn, "marking.run_finished")
    assert (run["expired"], run["completed"], run["failed"]) == (3, 0, 0)
    stats = await store.stats()
    assert (stats.expired, stats.pending) == (3, 0)
    assert (await store.run_progress("hw-x")).expired == 3
    # A second sweep finds nothing, and nothing is ever claimed.
    assert await store.expire_rows() == 0
    assert await store.claim(plan_of(CAP, THRESHOLD)) is None


async def test_a_row_dispatched_before_its_expiry_is_not_expired(
        store: Store, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 1, "hw-x")
    await store.enqueue(ids, "hw-x", 0, {}, expires_at=now() + timedelta(seconds=0.3))
    job = await store.claim(plan_of(CAP, THRESHOLD))
    assert job is not None
    await asyncio.sleep(0.4)
    assert await store.expire_rows() == 0
    assert await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                                plan_of())


# -- alerts ------------------------------------------------------------------


async def test_backlog_age_opens_once_and_resolves_once(store: Store, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 2, "hw-a")
    await store.enqueue(ids, "hw-a", 0, {})
    later = now() + timedelta(seconds=60)
    assert await evaluate(store, at=later, backlog=30) == [("backlog_age", "opened")]
    # While it stays open, no repeat.
    assert await evaluate(store, at=later + timedelta(seconds=5), backlog=30) == []
    [alert] = await store.open_alerts()
    # Its pool, and the kind of the row that waited longest (aiqueue 0023).
    assert (alert.alert, alert.pool, alert.kind, alert.threshold) == (
        "backlog_age", "default", "mark", 30)
    for job in [await store.claim(plan_of(CAP, THRESHOLD)) for _ in ids]:
        assert job is not None
        await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                             plan_of())
    assert await evaluate(store, at=later + timedelta(seconds=10), backlog=30) == [
        ("backlog_age", "resolved")]
    assert await store.open_alerts() == []
    [opened] = await events(conn, "marking.alert_opened")
    [resolved] = await events(conn, "marking.alert_resolved")
    assert set(opened) == ALERT_KEYS and ALERT_KEYS <= set(resolved)
    assert opened["alert"] == resolved["alert"] == "backlog_age"
    assert opened["value"] >= 60 and opened["threshold"] == 30
    assert resolved["opened_at"] == opened["opened_at"]


async def test_a_row_scheduled_for_tomorrow_raises_no_backlog_alert_today(
        store: Store, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 2, "hw-t")
    await store.enqueue(ids[:1], "hw-t", 0, {}, not_before=now() + timedelta(days=1))
    later = now() + timedelta(hours=12)
    assert await evaluate(store, at=later, backlog=1, stalled=1) == []
    # The same wait for a row that is due does raise it: the test can fail.
    await store.enqueue(ids[1:], "hw-t", 0, {})
    changes = await evaluate(store, at=later, backlog=1)
    assert changes == [("backlog_age", "opened")]


async def test_stalled_opens_when_nothing_is_dispatched_but_not_while_held(
        store: Store, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 1, "hw-st")
    await store.enqueue(ids, "hw-st", 0, {})
    later = now() + timedelta(seconds=30)
    # A refusal's hold is not a stall.
    await conn.execute("UPDATE ai_queue_control SET busy_until = $1", later + timedelta(minutes=1))
    assert await evaluate(store, at=later, stalled=10) == []
    await conn.execute("UPDATE ai_queue_control SET busy_until = NULL")
    assert await evaluate(store, at=later, stalled=10) == [("stalled", "opened")]
    # A dispatch the function takes resolves it.
    job = await store.claim(plan_of(CAP, THRESHOLD))
    assert job is not None
    assert await evaluate(store, stalled=10) == [("stalled", "resolved")]


async def test_a_failure_spike_opens_its_alert(store: Store, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 10, "hw-f")
    await store.enqueue(ids, "hw-f", 0, {})
    for n in range(10):
        job = await store.claim(plan_of(CAP, THRESHOLD))
        assert job is not None
        if n < 6:
            await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                                 plan_of())
        else:
            await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=False,
                                       max_attempts=3, error="model_error", outcome="failed")
    # 4 of 10 failed: not at 5 failures yet.
    assert await evaluate(store, failures_min=5, rate=0.2) == []
    assert await evaluate(store, failures_min=4, rate=0.5) == []
    assert await evaluate(store, failures_min=4, rate=0.4) == [("failure_spike", "opened")]
    [opened] = await events(conn, "marking.alert_opened")
    assert opened["value"] == pytest.approx(0.4)
    # Fifteen minutes on, the failures have aged out of the window.
    later = now() + timedelta(minutes=16)
    assert await evaluate(store, at=later, failures_min=4, rate=0.4) == [
        ("failure_spike", "resolved")]


async def test_two_instances_evaluating_at_once_open_one_alert(
        store: Store, db_url: str, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 1, "hw-c")
    await store.enqueue(ids, "hw-c", 0, {})
    other = Store(await connect_pool(db_url, max_size=4))
    try:
        later = now() + timedelta(seconds=60)
        for _ in range(5):
            await asyncio.gather(*(evaluate(s, at=later, backlog=1)
                                   for s in (store, other, store, other)))
    finally:
        await other.close()
    assert await conn.fetchval("SELECT count(*) FROM ai_queue_alerts") == 1
    assert len(await events(conn, "marking.alert_opened")) == 1


# -- alerts per pool (aiqueue 0023) --------------------------------------------


async def _pool(conn: asyncpg.Connection, name: str) -> None:
    """The pool's control row, as the first claim configured with it makes it."""
    await conn.execute("SELECT aiqueue_pool_control($1, true)", name)


async def test_each_pool_has_its_own_backlog_alert_naming_the_kind(
        store: Store, conn: asyncpg.Connection) -> None:
    await _pool(conn, "openai")
    ids = await add_submissions(conn, 3, "hw-p")
    await store.enqueue(ids[:2], "hw-p", 0, {}, kind="essay", pool="openai")
    later = now() + timedelta(seconds=60)
    assert await evaluate(store, at=later, backlog=30) == [("backlog_age", "opened")]
    [alert] = await store.open_alerts()
    assert (alert.pool, alert.kind) == ("openai", "essay")
    # The default pool's own backlog is a second incident, with its own kind.
    await store.enqueue(ids[2:], "hw-p", 0, {})
    assert await evaluate(store, at=later + timedelta(seconds=60), backlog=30) == [
        ("backlog_age", "opened")]
    assert {(a.pool, a.kind) for a in await store.open_alerts()} == {
        ("openai", "essay"), ("default", "mark")}
    [first, second] = await events(conn, "marking.alert_opened")
    assert (first["pool"], first["kind"], second["pool"]) == ("openai", "essay", "default")
    # Only the default pool's row goes: only its alert resolves.
    await conn.execute("UPDATE ai_marking_queue SET status = 'cancelled' WHERE pool = 'default'")
    assert await evaluate(store, at=later + timedelta(seconds=61), backlog=30) == [
        ("backlog_age", "resolved")]
    [left] = await store.open_alerts()
    assert left.pool == "openai"


async def test_a_pool_held_by_a_refusal_or_a_spend_cap_is_not_stalled(
        store: Store, conn: asyncpg.Connection) -> None:
    await _pool(conn, "openai")
    ids = await add_submissions(conn, 2, "hw-h")
    await store.enqueue(ids[:1], "hw-h", 0, {}, pool="openai", group="held")
    await store.enqueue(ids[1:], "hw-h", 0, {}, group="capped")
    later = now() + timedelta(seconds=30)
    # openai waits out a refusal; the default pool's only group is at a spend cap.
    await conn.execute("UPDATE ai_queue_control SET busy_until = $1 WHERE pool = 'openai'",
                       later + timedelta(minutes=1))
    await conn.execute("UPDATE ai_marking_fair SET capped_until = $1, capped_by = 'group_hour' "
                       "WHERE group_key = 'capped'", later + timedelta(hours=1))
    assert await evaluate(store, at=later, stalled=10) == []
    # The hold ends: openai stalls, and only openai.
    await conn.execute("UPDATE ai_queue_control SET busy_until = NULL")
    assert await evaluate(store, at=later, stalled=10) == [("stalled", "opened")]
    [alert] = await store.open_alerts()
    assert (alert.alert, alert.pool, alert.kind) == ("stalled", "openai", None)
    # The cap lifts: the default pool stalls too.
    await conn.execute("UPDATE ai_marking_fair SET capped_until = NULL")
    assert await evaluate(store, at=later, stalled=10) == [("stalled", "opened")]
    assert {a.pool for a in await store.open_alerts()} == {"openai", "default"}


async def test_a_failure_spike_is_its_pools(store: Store, conn: asyncpg.Connection) -> None:
    plan = json.dumps({"pools": [{"name": "default", "cap": 0}, {"name": "openai", "cap": 0}],
                       "kinds": [{"name": "mark", "pool": "default"},
                                 {"name": "essay", "pool": "openai"}]})
    ids = await add_submissions(conn, 6, "hw-fs")
    await store.enqueue(ids[:3], "hw-fs", 0, {}, kind="essay", pool="openai")
    await store.enqueue(ids[3:], "hw-fs", 0, {})
    while (job := await store.claim(plan_of(CAP, THRESHOLD, plan=plan))) is not None:
        if job.pool == "openai":
            await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0,
                                       retryable=False, max_attempts=1, error="model_error",
                                       outcome="failed")
        else:
            await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                                 plan_of())
    # 3 of 6 rows failed overall (50 %), but all of them in openai.
    assert await evaluate(store, failures_min=3, rate=0.9) == [("failure_spike", "opened")]
    [alert] = await store.open_alerts()
    assert (alert.pool, alert.value) == ("openai", 1.0)
