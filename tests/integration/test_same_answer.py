"""The same answer is marked once (docs/same-answer.md), through the Store on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import asyncpg
import pytest

from aiqueue.answers import AnswerKey, normalise
from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed, Job
from tests.conftest import enqueued
from tests.integration.conftest import STORE_POOL
from tests.integration.same_answer_kit import (
    PLAN,
    add_answers,
    complete,
    drain,
    mark_of,
    marks,
)
from tests.plans import settle_one

# The answers below differ in case and a final stop: a kind's "loose" takes them as one.
KEY = AnswerKey.derive("a-test-secret-of-some-length-000").loosely()
WORDS = ["oxygen", "chloroplasts", "I don't know", "photosynthesis", "carbon dioxide",
         "glucose", "water", "sunlight", "stomata", "chlorophyll"]


def hundred_answers() -> list[str]:
    """100 answers of which 40 repeat others after normalisation (60 distinct)."""
    distinct = [f"{WORDS[k % 10]} {k}" for k in range(60)]
    spellings = ["  {}.", "{}!", "{}", "{}".upper(), "{} "]
    repeats = [spellings[k % 5].format(distinct[k % 20]).replace(" ", "\t ", 1)
               if k % 2 else spellings[k % 5].format(distinct[k % 20]).upper()
               for k in range(40)]
    answers = distinct + repeats
    assert len({normalise(a, loose=True) for a in answers}) == 60
    return answers


async def drain_settling(store: Store, calls: Counter[str]) -> None:
    """As drain, through the webhook's path: each result settled with the next claim."""
    job = await store.claim(PLAN)
    while job is not None:
        calls[job.content] += 1
        applied, job = await settle_one(store, Completed(
            job.queue_id, job.dispatch_seq, mark_of(job.content),
            {"prompt_tokens": 100, "completion_tokens": 10, "cost_usd": 0.01}), PLAN)
        assert applied


async def test_each_distinct_answer_is_marked_once_and_copies_are_identical(
        store: Store, conn: asyncpg.Connection) -> None:
    answers = hundred_answers()
    ids = await add_answers(conn, answers)
    out = enqueued(await store.enqueue(ids, "hw-1", 0, {"q": "1"}, answer_key=KEY))
    assert len(out.queue_ids) == 100 and out.same_answers == 40
    calls: Counter[str] = Counter()
    await drain(store, calls)
    assert sum(calls.values()) == 60
    assert len({normalise(c, loose=True) for c in calls}) == 60
    got = await marks(conn, ids)
    assert all(got[i] is not None for i in ids)
    by_answer: dict[str, set[str]] = {}
    for i, a in zip(ids, answers, strict=True):
        by_answer.setdefault(normalise(a, loose=True), set()).add(got[i])
    assert all(len(m) == 1 for m in by_answer.values())
    rows = await conn.fetch(
        "SELECT q.status, q.leader_id, r.cost_usd, r.prompt_tokens FROM ai_marking_queue q "
        "JOIN ai_marking_results r USING (queue_id)")
    assert len(rows) == 100 and {r["status"] for r in rows} == {"completed"}
    copies = [r for r in rows if r["leader_id"] is not None]
    assert len(copies) == 40
    assert all(r["cost_usd"] == 0 and r["prompt_tokens"] == 0 for r in copies)


async def test_mark_each_calls_the_model_for_every_answer(
        store: Store, conn: asyncpg.Connection) -> None:
    ids = await add_answers(conn, hundred_answers())
    out = enqueued(await store.enqueue(ids, "hw-1", 0, {"q": "1"}))
    assert out.same_answers == 0
    calls: Counter[str] = Counter()
    await drain(store, calls)
    assert sum(calls.values()) == 100


async def test_a_later_enqueue_joins_the_live_leader(
        store: Store, conn: asyncpg.Connection) -> None:
    # One school's two classes: a group of their own (docs/same-answer.md).
    first = await add_answers(conn, ["Oxygen"])
    enqueued(await store.enqueue(first, "hw-1", 0, {"q": "1"}, group="school",
                                 answer_key=KEY))
    job = await store.claim(PLAN)
    assert job is not None
    later = await add_answers(conn, ["oxygen.", "oxygen"], "hw-2")
    out = enqueued(await store.enqueue(later, "hw-2", 0, {"q": "1"}, group="school",
                                       answer_key=KEY))
    assert out.same_answers == 2
    # Another payload (another question) is another group.
    other = await add_answers(conn, ["oxygen"], "hw-3")
    assert enqueued(await store.enqueue(other, "hw-3", 0, {"q": "2"}, group="school",
                                        answer_key=KEY)).same_answers == 0
    calls: Counter[str] = Counter()
    await complete(store, job, calls)
    assert len(set((await marks(conn, [*first, *later])).values())) == 1
    await drain(store, calls)
    assert sum(calls.values()) == 2


async def leader_and_followers(store: Store, conn: asyncpg.Connection, n: int = 3
                               ) -> tuple[Job, list[uuid.UUID]]:
    ids = await add_answers(conn, ["Oxygen"] * n)
    enqueued(await store.enqueue(ids, "hw-1", 0, {"q": "1"}, answer_key=KEY))
    job = await store.claim(PLAN)
    assert job is not None
    # The claim never dispatches a follower.
    assert await store.claim(PLAN) is None
    return job, ids


async def test_a_leader_that_fails_for_good_hands_over_with_no_attempt_used(
        store: Store, conn: asyncpg.Connection) -> None:
    job, ids = await leader_and_followers(store, conn)
    assert await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=False,
                                      max_attempts=3, error="bad", outcome="failed") == "failed"
    heir = await store.claim(PLAN)
    assert heir is not None and heir.attempt == 1 and heir.queue_id != job.queue_id
    assert await store.claim(PLAN) is None
    calls: Counter[str] = Counter()
    await complete(store, heir, calls)
    got = await marks(conn, ids)
    assert got[job.submission_id] is None
    assert len({got[i] for i in ids if i != job.submission_id}) == 1


async def test_a_cancelled_leader_hands_over(store: Store, conn: asyncpg.Connection) -> None:
    ids = await add_answers(conn, ["Oxygen"] * 3)
    out = enqueued(await store.enqueue(ids, "hw-1", 0, {"q": "1"}, answer_key=KEY))
    leader = await conn.fetchval("SELECT queue_id FROM ai_marking_queue WHERE leader_id IS NULL")
    assert await store.cancel_row(leader, "test")
    heir = await store.claim(PLAN)
    assert heir is not None and heir.queue_id in out.queue_ids and heir.queue_id != leader
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue WHERE leader_id = $1",
                               heir.queue_id) == 1


async def test_erasing_a_leader_in_flight_still_marks_the_rest(
        store: Store, conn: asyncpg.Connection) -> None:
    job, ids = await leader_and_followers(store, conn)
    await store.erase([job.submission_id], "api")
    calls: Counter[str] = Counter()
    late = await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}), PLAN)
    assert not late  # its row is gone: nothing applied
    await drain(store, calls)
    assert sum(calls.values()) == 1
    got = await marks(conn, ids)
    assert got[job.submission_id] is None
    rest = [got[i] for i in ids if i != job.submission_id]
    assert None not in rest and len(set(rest)) == 1
    # The erased row's key went with it.
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                               "WHERE submission_id = $1", job.submission_id) == 0


@pytest.mark.store_pool(4)
async def test_two_instances_apply_leader_and_members_once_each(
        db_url: str, conn: asyncpg.Connection) -> None:
    answers = hundred_answers()
    ids = await add_answers(conn, answers)
    stores = [Store(await connect_pool(db_url, max_size=STORE_POOL)) for _ in range(2)]
    try:
        enqueued(await stores[0].enqueue(ids, "hw-1", 0, {"q": "1"}, answer_key=KEY))
        calls: Counter[str] = Counter()
        # One instance completes results alone, the other settles them with its next claim.
        await asyncio.gather(drain(stores[0], calls), drain_settling(stores[1], calls))
        assert sum(calls.values()) == 60
    finally:
        for s in stores:
            await s.close()
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_results") == 100
    assert await conn.fetchval(
        "SELECT count(DISTINCT submission_id) FROM ai_marking_results") == 100
    assert await conn.fetchval("SELECT count(*) FROM submissions "
                               "WHERE ai_marked_at IS NULL AND id = ANY($1::uuid[])", ids) == 0


async def test_a_remark_groups_the_same_way(store: Store, conn: asyncpg.Connection) -> None:
    ids = await add_answers(conn, ["Oxygen", "oxygen.", "water"])
    await conn.execute("UPDATE submissions SET ai_result = '{\"score\": 1}', "
                       "ai_marked_at = now() WHERE id = ANY($1::uuid[])", ids)
    out = enqueued(await store.enqueue(ids, "hw-1", 0, {"q": "1"}, remark=True,
                                       answer_key=KEY))
    assert (len(out.queue_ids), out.same_answers) == (3, 1)
    calls: Counter[str] = Counter()
    await drain(store, calls)
    assert sum(calls.values()) == 2
