"""A lost commit answer (docs/deploying/index.md), against a real PostgreSQL.

A webhook's settle (the result, then the next claim, in one transaction)
commits, but its answer never reaches the app; the store or the webhook
retries.  The retry must apply nothing twice and leave no claimed row
without a dispatch: it gets back the row the first settle claimed.
"""

from __future__ import annotations

import asyncio
import json
import uuid
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
from tests.plans import TAKER, plan_of, settle_one

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
    applied, b = await settle_one(store, Completed(a.queue_id, a.dispatch_seq, {"score": 1},
                                              {"model": "m"}), plan_of(CAP, THRESHOLD))
    assert applied and b is not None
    # The answer is lost: the app never sees `b`.  The same result comes again.
    again, handed = await settle_one(store, Completed(a.queue_id, a.dispatch_seq, {"score": 9},
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


async def test_a_claimed_row_is_handed_back_to_its_taker_only(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 3)
    await store.enqueue(ids, "hw-1", 0, {})
    a = await store.claim(plan_of(CAP, THRESHOLD))
    assert a is not None
    result = Completed(a.queue_id, a.dispatch_seq, {"score": 1}, None)
    # The settle takes `b` for its caller, in the same statement (one round trip).
    _, b = await settle_one(store, result, plan_of(CAP, THRESHOLD), TAKER)
    assert b is not None
    # Repeats from other callers (a function repeating a webhook whose answer it
    # lost) never get `b`: its caller sends it.  They claim as any result would:
    # here the cap's one free slot, once.
    others = await asyncio.gather(*(settle_one(store, result, plan_of(CAP, THRESHOLD),
                                               uuid.uuid4()) for _ in range(4)))
    got = [job.queue_id for _, job in others if job is not None]
    assert b.queue_id not in got and len(got) == 1 and a.queue_id not in got
    # The caller's own repeat (its first answer lost) still gets `b` back.
    again, handed = await settle_one(store, result, plan_of(CAP, THRESHOLD), TAKER)
    assert not again and handed is not None and handed.queue_id == b.queue_id
    assert await processing(conn) == {b.queue_id, got[0]}


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

    async def settle(*args: Any, **kw: Any) -> list[tuple[bool, Job | None]]:
        calls["n"] += 1
        answer = await real(*args, **kw)
        if calls["n"] == 1:
            raise StoreError("the database connection broke")
        return answer

    store.settle = settle  # type: ignore[method-assign]


async def test_a_webhook_of_several_results_settles_them_in_one_statement_and_its_repeat_too(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 9)
    await store.enqueue(ids, "hw-1", 0, {})
    plan = plan_of(3, THRESHOLD)
    out = [await store.claim(plan) for _ in range(3)]
    items = [Completed(j.queue_id, j.dispatch_seq, {"score": 1}, {"model": "m"})
             for j in out if j is not None]
    # Three results free three slots: the one statement claims three rows.
    first = await store.settle(items, plan, TAKER)
    assert [applied for applied, _ in first] == [True] * 3
    claimed = {job.queue_id for _, job in first if job is not None}
    assert len(claimed) == 3 and await processing(conn) == claimed
    # Its answer lost, the same caller repeats the webhook: the same rows come back.
    again = await store.settle(items, plan, TAKER)
    assert [applied for applied, _ in again] == [False] * 3
    assert {job.queue_id for _, job in again if job is not None} == claimed
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_results") == 3
    assert await processing(conn) == claimed
