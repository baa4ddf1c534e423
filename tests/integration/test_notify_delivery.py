"""Delivering the outbox to a real receiver on loopback, against a real PostgreSQL.

The receiver verifies every request with the standardwebhooks library's own
verifier.  Retries are made due at once (QUEUE_NOTIFY_RETRY_BASE_SECONDS=0)
so each deliver_due call is one attempt.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.db.store import Store
from aiqueue.models import Completed
from aiqueue.notify import delivery
from aiqueue.runtime import Runtime
from aiqueue.web.app import create_app
from tests.conftest import SECRET, add_submissions, make_settings
from tests.e2e.receiver import Receiver, new_secret, serving
from tests.plans import plan_of

CAP, THRESHOLD = 0, 5
KEY = new_secret()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serving(Receiver(KEY)) as r:
        yield r


def settings_for(db_url: str, url: str, **overrides: Any) -> Any:
    fields: dict[str, Any] = {"notify_url": url, "notify_secret": KEY,
                              "notify_timeout_seconds": 2.0, "notify_retry_base_seconds": 0.0}
    return make_settings(db_url, **{**fields, **overrides})


@pytest.fixture
async def rt(db_url: str, receiver: Receiver) -> AsyncIterator[Runtime]:
    runtime = await Runtime.create(settings_for(db_url, receiver.url), db_url)
    yield runtime
    await runtime.close()


async def finish_runs(store: Store, conn: asyncpg.Connection, n: int) -> None:
    """n one-row runs, each completed: n marking.run_finished events."""
    for k in range(n):
        ids = await add_submissions(conn, 1, f"hw-{k}")
        await store.enqueue(ids, f"hw-{k}", 0, {})
        job = await store.claim(plan_of(CAP, THRESHOLD))
        assert job is not None
        await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                             plan_of())


async def outbox(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await conn.fetch(
        "SELECT id::text AS id, state, attempts, last_outcome "
        "FROM ai_marking_outbox ORDER BY created_at, id")
    return rows


async def test_each_event_arrives_signed_with_its_outbox_id(
    rt: Runtime, receiver: Receiver, conn: asyncpg.Connection
):
    await finish_runs(rt.store, conn, 3)
    assert await delivery.deliver_due(rt) == 3
    rows = await outbox(conn)
    assert {r["state"] for r in rows} == {"delivered"}
    delivered = receiver.delivered()
    assert set(delivered) == {r["id"] for r in rows}
    assert {p["type"] for p in delivered.values()} == {"marking.run_finished"}
    assert await delivery.deliver_due(rt) == 0  # nothing is sent twice


async def test_three_500s_then_the_fourth_try_delivers_with_the_same_id(
    rt: Runtime, receiver: Receiver, conn: asyncpg.Connection
):
    receiver.answers = [500, 500, 500]
    await finish_runs(rt.store, conn, 1)
    for _ in range(4):
        assert await delivery.deliver_due(rt) == 1
    [row] = await outbox(conn)
    assert (row["state"], row["attempts"], row["last_outcome"]) == ("delivered", 4, "200")
    assert [r.answered for r in receiver.received] == [500, 500, 500, 200]
    assert {r.webhook_id for r in receiver.received} == {row["id"]}
    assert all(r.payload is not None for r in receiver.received)  # every one verified


async def test_a_410_gives_up_at_once(rt: Runtime, receiver: Receiver,
                                      conn: asyncpg.Connection):
    receiver.answers = [410]
    await finish_runs(rt.store, conn, 1)
    assert await delivery.deliver_due(rt) == 1
    assert await delivery.deliver_due(rt) == 0
    [row] = await outbox(conn)
    assert (row["state"], row["attempts"], row["last_outcome"]) == ("gave_up", 1, "410")
    assert len(receiver.received) == 1


async def test_failures_past_the_retry_window_give_up(
    rt: Runtime, receiver: Receiver, conn: asyncpg.Connection
):
    receiver.answers = [500] * 10
    await finish_runs(rt.store, conn, 1)
    assert await delivery.deliver_due(rt) == 1
    assert (await outbox(conn))[0]["state"] == "waiting"
    await conn.execute("UPDATE ai_marking_outbox SET created_at = now() - interval '25 hours'")
    assert await delivery.deliver_due(rt) == 1
    [row] = await outbox(conn)
    assert (row["state"], row["attempts"]) == ("gave_up", 2)


async def test_a_retry_is_never_due_after_the_window_ends(
    db_url: str, receiver: Receiver, conn: asyncpg.Connection
):
    """The last try comes when the 24 h window ends, even when the backoff says later."""
    runtime = await Runtime.create(settings_for(db_url, receiver.url,
                                                notify_retry_base_seconds=3600.0), db_url)
    try:
        receiver.answers = [500]
        await finish_runs(runtime.store, conn, 1)
        await conn.execute("UPDATE ai_marking_outbox SET created_at = now() - interval '86390 s'")
        assert await delivery.deliver_due(runtime) == 1
        wait = await conn.fetchval("SELECT extract(epoch FROM next_at - now()) "
                                   "FROM ai_marking_outbox")
        assert 0 < wait <= 10
    finally:
        await runtime.close()


async def test_two_instances_at_once_send_each_event_once(
    db_url: str, rt: Runtime, receiver: Receiver, conn: asyncpg.Connection
):
    other = await Runtime.create(rt.settings, db_url)
    try:
        await finish_runs(rt.store, conn, 8)
        sent = await asyncio.gather(delivery.deliver_due(rt), delivery.deliver_due(other))
        assert sum(sent) == 8
    finally:
        await other.close()
    ids = [r.webhook_id for r in receiver.received]
    assert len(ids) == len(set(ids)) == 8


async def test_an_attempt_abandoned_mid_delivery_is_due_again_after_its_lease(
    rt: Runtime, receiver: Receiver, conn: asyncpg.Connection
):
    await finish_runs(rt.store, conn, 1)
    # An instance claimed it and died before it could send or record anything.
    [claimed] = await rt.store.claim_deliveries(5, delivery.lease_seconds(rt.settings))
    assert await delivery.deliver_due(rt) == 0
    await conn.execute("UPDATE ai_marking_outbox SET next_at = now()")  # the lease ran out
    assert await delivery.deliver_due(rt) == 1
    [row] = await outbox(conn)
    assert (row["state"], row["attempts"]) == ("delivered", 2)
    assert [r.webhook_id for r in receiver.received] == [str(claimed.event_id)]
    # The dead claim's late failure can't undo the delivery.
    assert await rt.store.delivery_failed(claimed.event_id, claimed.attempt, "timeout",
                                          delay=0, window=60, stop=False) is None


async def test_an_unreachable_receiver_is_retried_with_a_content_free_code(
    db_url: str, conn: asyncpg.Connection
):
    runtime = await Runtime.create(settings_for(db_url, "http://127.0.0.1:9/hook"), db_url)
    try:
        await finish_runs(runtime.store, conn, 1)
        assert await delivery.deliver_due(runtime) == 1
    finally:
        await runtime.close()
    [row] = await outbox(conn)
    assert (row["state"], row["attempts"], row["last_outcome"]) == ("waiting", 1, "ConnectError")


async def test_without_a_url_events_are_kept_but_not_sent(db_url: str, conn: asyncpg.Connection):
    runtime = await Runtime.create(make_settings(db_url), db_url)
    try:
        await finish_runs(runtime.store, conn, 1)
        assert await delivery.deliver_due(runtime) == 0
        assert await delivery.next_due(runtime) is None
    finally:
        await runtime.close()
    assert [r["state"] for r in await outbox(conn)] == ["waiting"]


async def test_pruning_keeps_recent_and_waiting_events(rt: Runtime, conn: asyncpg.Connection):
    await finish_runs(rt.store, conn, 4)
    await conn.execute("""
        UPDATE ai_marking_outbox o SET created_at = now() - x.age::interval, state = x.state
        FROM (SELECT id,
                     (ARRAY['8 days', '7 days 12 hours', '1 day', '9 days'])[row_number() OVER ()]
                     AS age,
                     (ARRAY['delivered', 'waiting', 'gave_up', 'waiting'])[row_number() OVER ()]
                     AS state
              FROM ai_marking_outbox) x
        WHERE o.id = x.id""")
    # 7 days kept after the end; undeliverable ones 7 days after the 24 h window.
    assert await rt.store.prune_outbox(7 * 86400, 86400) == 2
    left = sorted(r["state"] for r in await outbox(conn))
    assert left == ["gave_up", "waiting"]


async def test_the_operator_page_lists_waiting_and_given_up_events(
    db_url: str, receiver: Receiver, conn: asyncpg.Connection
):
    app = create_app(settings_for(db_url, receiver.url))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://app.test") as client:
        rt = await app.state.aiqueue.get()
        receiver.answers = [410, 500]
        await finish_runs(rt.store, conn, 3)
        await delivery.deliver_due(rt)
        r = await client.post("/ai-queue/login", data={"password": SECRET, "next": "/ai-queue"})
        assert r.status_code == 303
        html = (await client.get("/ai-queue")).text
    await app.state.aiqueue.close()
    states = dict(await conn.fetch("SELECT id::text, state FROM ai_marking_outbox"))
    assert sorted(states.values()) == ["delivered", "gave_up", "waiting"]
    shown = dict(re.findall(r'data-event="([^"]+)" data-state="([^"]+)"', html))
    assert shown == {i: s.replace("_", " ") for i, s in states.items() if s != "delivered"}
    assert "1 waiting · 1 gave up" in html
