"""The same answer on the overnight lane and under a spend cap."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from aiqueue.answers import AnswerKey
from aiqueue.db.store import Store
from aiqueue.models import Completed, Enqueued
from aiqueue.queue.overnight import lane_times
from aiqueue.settings import ModelPrice
from aiqueue.settings.kinds import DEFAULT_POOL
from aiqueue.settings.money import Money, PoolMoney
from tests.conftest import enqueued
from tests.integration.batch_kit import Rig, lane_rig
from tests.plans import plan_of

pytestmark = pytest.mark.e2e
KEY = AnswerKey.derive("a-test-secret-of-some-length-000").loosely()


@pytest.fixture
async def rig(db_url: str, conn: asyncpg.Connection) -> AsyncIterator[Rig]:
    async with lane_rig("openai", db_url, conn, max_attempts=3) as out:
        yield out


async def _on_the_lane(rig: Rig, assignment: str, answers: list[str]) -> Enqueued:
    """Submissions with these answers, enqueued keyed on the batch lane."""
    ids = [uuid.uuid4() for _ in answers]
    await rig.conn.executemany("INSERT INTO submissions (id, assignment_id, content) "
                               "VALUES ($1, $2, $3)",
                               [(i, assignment, a) for i, a in zip(ids, answers, strict=True)])
    batch = await lane_times(rig.rt, DEFAULT_POOL, None)
    return enqueued(await rig.rt.store.enqueue(
        ids, assignment, 0, {"rubric": "- names chlorophyll", "max_score": 10}, batch=batch,
        answer_key=KEY))


async def test_a_batch_carries_one_line_per_distinct_answer(rig: Rig) -> None:
    out = await _on_the_lane(rig, "hw-b", ["Chlorophyll", "chlorophyll.", "CHLOROPHYLL!",
                                           "stomata", "Stomata", "xylem"])
    assert out.same_answers == 3
    first = await rig.step()
    assert (first.packed, first.batches) == (3, 1)
    rig.clock.advance(2)
    second = await rig.step()
    assert second.applied == 3
    assert await rig.statuses() == {"completed": 6}
    rows = await rig.conn.fetch(
        "SELECT s.content, s.ai_result::text AS r, m.cost_usd, m.lane FROM submissions s "
        "JOIN ai_marking_results m ON m.submission_id = s.id")
    assert len(rows) == 6 and all(r["lane"] == "batch" for r in rows)
    by_word: dict[str, set[str]] = {}
    for r in rows:
        by_word.setdefault(r["content"].lower().rstrip(".!"), set()).add(r["r"])
    assert all(len(m) == 1 for m in by_word.values())
    assert sum(1 for r in rows if r["cost_usd"] == 0) == 3


async def test_a_batch_packed_in_chunks_takes_no_follower(rig: Rig) -> None:
    # Two rows a chunk: the first chunk opens the batch, the later ones add to it; a
    # follower of the same answer waits for its leader in every chunk alike.
    out = await _on_the_lane(rig, "hw-k", ["Chlorophyll", "chlorophyll.", "CHLOROPHYLL!",
                                           "stomata", "Stomata", "xylem", "phloem", "Phloem."])
    assert out.same_answers == 4
    first = await rig.step(render_rows=2)
    assert (first.packed, first.batches) == (4, 1)
    assert await rig.conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                                   "WHERE batch_id IS NOT NULL") == 4
    rig.clock.advance(2)
    await rig.step(render_rows=2)
    assert await rig.statuses() == {"completed": 8}
    assert await rig.conn.fetchval("SELECT count(*) FROM ai_marking_results "
                                   "WHERE cost_usd = 0") == 4


async def test_copies_spend_nothing_under_a_spend_cap(store: Store,
                                                      conn: asyncpg.Connection) -> None:
    # $1 a call, $2 an hour for the group: two answers, five copies each.
    money = Money({"default": PoolMoney(caps={"group_usd_per_hour": 2.0},
                                        prices={"m": ModelPrice(1.0, 1.0)})},
                  hour_seconds=600, day_seconds=86400)
    ids = [uuid.uuid4() for _ in range(10)]
    await conn.executemany("INSERT INTO submissions (id, assignment_id, content) "
                           "VALUES ($1, 'hw-c', $2)",
                           [(i, "Xylem" if k % 2 else "phloem.") for k, i in enumerate(ids)])
    enqueued(await store.enqueue(ids, "hw-c", 0, {"q": 1}, answer_key=KEY))
    calls = 0
    plan = plan_of(1, 5, money=money)
    while (job := await store.claim(plan)) is not None:
        calls += 1
        assert await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": calls},
                                              {"model": "m", "prompt_tokens": 500_000,
                                               "completion_tokens": 500_000, "cost_usd": 1.0}),
                                    plan)
    assert calls == 2
    assert await conn.fetchval("SELECT count(*) FROM submissions "
                               "WHERE ai_marked_at IS NOT NULL AND assignment_id = 'hw-c'") == 10
    spent = await conn.fetchval("SELECT sum(usd) FROM ai_marking_spend "
                                "WHERE group_key = 'hw-c' AND span = 'hour'")
    assert spent == pytest.approx(2.0)
    # Two calls reached the cap, and every row ended completed: none waits for a window.
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                               "WHERE status <> 'completed'") == 0
