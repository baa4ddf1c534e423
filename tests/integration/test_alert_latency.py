"""The latency alert: the last 15 minutes' p95 processing time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import asyncpg

from aiqueue.db.store import Store
from aiqueue.models import Completed
from tests.conftest import add_submissions
from tests.plans import plan_of

NEVER = 10**9


async def evaluate(store: Store, p95: float, at: datetime | None = None
                   ) -> list[tuple[str, str]]:
    return await store.evaluate_alerts(backlog=NEVER, stalled=NEVER, failures_min=NEVER,
                                       failure_rate=1.0, p95=p95, at=at)


async def test_slow_marking_opens_the_latency_alert_once_and_it_resolves(
        store: Store, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 20, "hw-l")
    await store.enqueue(ids, "hw-l", 0, {})
    for n in range(20):
        job = await store.claim(plan_of(0, 5))
        assert job is not None
        # Two of twenty took 15 minutes: above the p95's 5 %.
        took = 900 if n < 2 else 30
        await conn.execute("UPDATE ai_marking_queue SET started_at = now() - $2::float8 "
                           "* interval '1 second' WHERE queue_id = $1", job.queue_id, took)
        await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                             plan_of())
    assert await evaluate(store, p95=1000) == []
    assert await evaluate(store, p95=600) == [("latency", "opened")]
    assert await evaluate(store, p95=600) == []  # one incident, one event
    body = await conn.fetchval("SELECT body::text FROM ai_marking_outbox "
                               "WHERE type = 'marking.alert_opened'")
    opened = json.loads(body)
    assert opened["alert"] == "latency" and opened["pool"] == "default"
    assert 600 < opened["value"] < 901 and opened["threshold"] == 600
    later = datetime.now(UTC) + timedelta(minutes=16)
    assert await evaluate(store, p95=600, at=later) == [("latency", "resolved")]
