"""A lost commit answer (CONTRACT §9a), against a real PostgreSQL.

A webhook's settle (the result, then the next claim, in one transaction)
commits, but its answer never reaches the app; the store or the webhook
retries.  The retry must apply nothing twice and leave no claimed row
without a dispatch: it gets back the row the first settle claimed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import httpx
import respx

from aiqueue.db.store import Store
from aiqueue.errors import StoreError
from aiqueue.models import Completed, Job
from aiqueue.tokens import Tokens
from aiqueue.web.app import create_app
from tests.conftest import FN, SECRET, SELF_CHAIN, add_submissions, app_client, make_settings
from tests.plans import plan_of

CAP, THRESHOLD = 2, 5


async def processing(conn: asyncpg.Connection) -> set[Any]:
    rows = await conn.fetch("SELECT queue_id FROM ai_marking_queue WHERE status = 'processing'")
    return {r["queue_id"] for r in rows}


async def test_a_repeated_settle_hands_back_the_row_its_lost_answer_claimed(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 4)
    await store.enqueue(ids, "hw-1", 0, {})
    a = await store.claim(plan_of(CAP, THRESHOLD))
    assert a is not None
    applied, b = await store.settle(Completed(a.queue_id, a.dispatch_seq, {"score": 1},
                                              {"model": "m"}), plan_of(CAP, THRESHOLD))
    assert applied and b is not None
    # The answer is lost: the app never sees `b`.  The same result comes again.
    again, handed = await store.settle(Completed(a.queue_id, a.dispatch_seq, {"score": 9},
                                                 {"model": "m"}), plan_of(CAP, THRESHOLD))
    assert not again and handed is not None
    assert (handed.queue_id, handed.dispatch_seq, handed.attempt) == \
        (b.queue_id, b.dispatch_seq, b.attempt)
    # Nothing applied twice, nothing claimed twice: one row in flight, `b`.
    assert await processing(conn) == {b.queue_id}
    assert await conn.fetchval("SELECT ai_result->>'score' FROM submissions WHERE id = $1",
                               ids[0]) == "1"
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_results") == 1
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_attempts WHERE queue_id = $1", b.queue_id) == 1


async def test_a_handed_back_row_is_sent_by_one_taker_only(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 3)
    await store.enqueue(ids, "hw-1", 0, {})
    a = await store.claim(plan_of(CAP, THRESHOLD))
    assert a is not None
    _, b = await store.settle(Completed(a.queue_id, a.dispatch_seq, {"score": 1}, None),
                              plan_of(CAP, THRESHOLD))
    assert b is not None
    # Two repeats at once (the store's retry and the function's) both get `b` back...
    repeats = await asyncio.gather(*(
        store.settle(Completed(a.queue_id, a.dispatch_seq, {"score": 1}, None),
                     plan_of(CAP, THRESHOLD))
        for _ in range(2)))
    assert [job.queue_id for _, job in repeats if job is not None] == [b.queue_id] * 2
    # ...but only the first to take it sends it.
    taken = await asyncio.gather(*(store.take_handoff(b.queue_id, b.dispatch_seq)
                                   for _ in range(5)))
    assert sorted(taken) == [False] * 4 + [True]
    # Once sent, a repeat claims as any result would (here the cap's free slot).
    _, later = await store.settle(Completed(a.queue_id, a.dispatch_seq, {"score": 1}, None),
                                  plan_of(CAP, THRESHOLD))
    assert later is not None and later.queue_id not in (a.queue_id, b.queue_id)


async def test_the_webhook_dispatches_the_row_a_lost_answer_claimed_exactly_once(
    db_url: str, conn: asyncpg.Connection
) -> None:
    """Through the app: the settle commits, its answer is lost, the webhook goes on."""
    app = create_app(make_settings(db_url, max_in_flight=1))
    ids = await add_submissions(conn, 3)
    sent: list[str] = []

    def function(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content)["queue_id"])
        return httpx.Response(202)

    with respx.mock(assert_all_called=False) as mock:
        mock.post(SELF_CHAIN).mock(return_value=httpx.Response(200, json={}))
        mock.post(FN).mock(side_effect=function)
        async with app_client(app) as client:
            rt = await app.state.aiqueue.get()
            await rt.store.enqueue(ids, "hw-1", 0, {"rubric": "r", "max_score": 5})
            first = await rt.store.claim(plan_of(1, THRESHOLD))
            assert first is not None
            _lose_the_first_settle_answer(rt.store)
            item = {"queue_id": str(first.queue_id), "status": "completed",
                    "token": Tokens(SECRET).callback(first.queue_id, first.dispatch_seq, 1),
                    "result": {"score": 4, "max_score": 5}}
            r = await client.post("/webhooks/ai-mark", json=[item])
            assert r.status_code == 200
    in_flight = await processing(conn)
    # One row in flight (the cap), and it is the one that was dispatched, once.
    assert len(in_flight) == 1 and [str(q) for q in in_flight] == sent
    assert await conn.fetchval("SELECT status FROM ai_marking_queue WHERE queue_id = $1",
                               first.queue_id) == "completed"


def _lose_the_first_settle_answer(store: Store) -> None:
    """The first settle commits, then its answer is lost (as a dropped connection)."""
    real = store.settle
    calls = {"n": 0}

    async def settle(*args: Any, **kw: Any) -> tuple[bool, Job | None]:
        calls["n"] += 1
        answer = await real(*args, **kw)
        if calls["n"] == 1:
            raise StoreError("the database connection broke")
        return answer

    store.settle = settle  # type: ignore[method-assign]
