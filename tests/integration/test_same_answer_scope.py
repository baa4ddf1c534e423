"""The same answer kept to its own group, lane and case, following only a leader that can
run now, and an enqueue that locks only the leaders it joins (docs/same-answer.md)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from aiqueue.answers import AnswerKey, KindSameAnswers
from aiqueue.db.store import Store
from aiqueue.models import Completed
from aiqueue.models.calibration import GateAsked
from aiqueue.web.app import create_app
from tests.conftest import app_client, enqueued
from tests.integration.same_answer_kit import (
    PLAN,
    add,
    add_answers,
    drain,
    enqueue,
    marks,
    settings_with,
)

KEY = AnswerKey.derive("a-test-secret-of-some-length-000")
FAR = datetime.now(UTC) + timedelta(days=300)


async def test_case_is_kept_unless_the_kind_is_loose(store: Store,
                                                     conn: asyncpg.Connection) -> None:
    answers = ["CO", "Co", "NaCl", "nacl", "  CO ", "NaCl\u3000"]
    ids = await add_answers(conn, answers)
    out = enqueued(await store.enqueue(ids, "hw-1", 0, {"q": "1"}, answer_key=KEY))
    # "CO" and "Co" are carbon monoxide and cobalt: only the spacing is forgiven.
    assert out.same_answers == 2
    calls: Counter[str] = Counter()
    await drain(store, calls)
    assert sorted(calls) == ["CO", "Co", "NaCl", "nacl"]
    loose = await add_answers(conn, ["Oxygen", "oxygen.", "OXYGEN!"], "hw-2")
    assert enqueued(await store.enqueue(loose, "hw-2", 0, {"q": "1"},
                                        answer_key=KEY.loosely())).same_answers == 2


async def test_another_groups_leader_is_never_followed(store: Store,
                                                       conn: asyncpg.Connection) -> None:
    # One school's row is due a year away; another school's identical answer is
    # marked now, with its own result.
    one = await add_answers(conn, ["oxygen"], "hw-a")
    enqueued(await store.enqueue(one, "hw-a", 0, {"q": "1"}, group="school-a",
                                 answer_key=KEY))
    two = await add_answers(conn, ["oxygen"], "hw-b")
    out = enqueued(await store.enqueue(two, "hw-b", 0, {"q": "1"}, group="school-b",
                                       answer_key=KEY))
    assert out.same_answers == 0
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                               "WHERE leader_id IS NOT NULL") == 0


async def test_a_leader_held_by_not_before_leads_no_one(store: Store,
                                                        conn: asyncpg.Connection) -> None:
    later = await add_answers(conn, ["oxygen"])
    enqueued(await store.enqueue(later, "hw-1", 0, {"q": "1"}, not_before=FAR,
                                 answer_key=KEY))
    now = await add_answers(conn, ["oxygen", "oxygen"])
    out = enqueued(await store.enqueue(now, "hw-1", 0, {"q": "1"}, answer_key=KEY))
    # The two lead each other, not the row held for months.
    assert out.same_answers == 1
    calls: Counter[str] = Counter()
    await drain(store, calls)
    assert sum(calls.values()) == 1
    got = await marks(conn, [*later, *now])
    assert got[later[0]] is None and got[now[0]] is not None and got[now[0]] == got[now[1]]


async def test_a_row_follows_only_a_leader_of_its_lane(store: Store,
                                                       conn: asyncpg.Connection) -> None:
    night = datetime.now(UTC) + timedelta(hours=10)
    batch = await add_answers(conn, ["oxygen"])
    enqueued(await store.enqueue(batch, "hw-1", 0, {"q": "1"}, answer_key=KEY,
                                 batch=(night + timedelta(hours=2), night)))
    live = await add_answers(conn, ["oxygen"])
    out = enqueued(await store.enqueue(live, "hw-1", 0, {"q": "1"}, answer_key=KEY))
    assert out.same_answers == 0
    job = await store.claim(PLAN)
    assert job is not None and job.submission_id == live[0]


@pytest.mark.parametrize("setting", ["mark_once", "off"])
async def test_the_kinds_setting_and_the_dry_run_step_over_a_held_leader(
        db_url: str, conn: asyncpg.Connection, setting: KindSameAnswers) -> None:
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    async with app_client(create_app(settings_with(db_url, setting))) as client:
        held = await add(conn, ["oxygen"])
        await enqueue(client, held, not_before=FAR.isoformat())
        ids = await add(conn, ["oxygen", "oxygen", "Oxygen"])
        dry = await enqueue(client, ids, dry_run=True)
        # The row held for months leads no one; "CO" is not "Co"; "off" marks each.
        assert (dry["rows"], dry["same_answers"]) == ((2, 1) if setting == "mark_once"
                                                      else (3, 0))
        body = await enqueue(client, ids)
        assert body["same_answers"] == dry["same_answers"]


async def _open_enqueue(db_url: str, store: Store, ids: list[uuid.UUID], assignment: str
                        ) -> asyncpg.Connection:
    """An enqueue's statement run in a transaction left open (the caller rolls it back)."""
    other = await asyncpg.connect(db_url)
    await other.execute("BEGIN")
    await other.fetch(store.sql["enqueue"], ids, assignment, 0, '{"q": "1"}', assignment, False,
                      "mark", "default", None, None, KEY.inner_pad, KEY.outer_pad, False, "live")
    return other


async def test_an_enqueue_locks_only_the_leaders_its_answers_join(
        db_url: str, store: Store, conn: asyncpg.Connection) -> None:
    first = await add_answers(conn, ["oxygen", "water"])
    enqueued(await store.enqueue(first, "hw-1", 0, {"q": "1"}, answer_key=KEY))
    water = await conn.fetchval("SELECT queue_id FROM ai_marking_queue q JOIN submissions s "
                                "ON s.id = q.submission_id WHERE s.content = 'water'")
    oxygen = await conn.fetchval("SELECT queue_id FROM ai_marking_queue q JOIN submissions s "
                                 "ON s.id = q.submission_id WHERE s.content = 'oxygen'")
    more = await add_answers(conn, ["oxygen", "glucose"])
    other = await _open_enqueue(db_url, store, more, "hw-1")
    try:
        # The leader joined is share-locked; the other leader is free to end now.
        with pytest.raises(asyncpg.LockNotAvailableError):
            await conn.fetchval("SELECT 1 FROM ai_marking_queue WHERE queue_id = $1 "
                                "FOR UPDATE NOWAIT", oxygen)
        assert await conn.fetchval("SELECT 1 FROM ai_marking_queue WHERE queue_id = $1 "
                                   "FOR UPDATE NOWAIT", water) == 1
    finally:
        await other.execute("ROLLBACK")
        await other.close()


async def test_a_settle_is_not_blocked_by_an_enqueue_of_other_answers(
        db_url: str, store: Store, conn: asyncpg.Connection) -> None:
    first = await add_answers(conn, ["water"])
    enqueued(await store.enqueue(first, "hw-1", 0, {"q": "1"}, answer_key=KEY))
    job = await store.claim(PLAN)
    assert job is not None
    # Another class, the same question (one shared question bank), other answers.
    more = await add_answers(conn, ["oxygen", "glucose"], "hw-2")
    other = await _open_enqueue(db_url, store, more, "hw-2")
    try:
        settle = asyncio.create_task(store.complete(Completed(
            job.queue_id, job.dispatch_seq, {"score": 1},
            {"prompt_tokens": 1, "completion_tokens": 1}), PLAN))
        # Either the settle ends, or it waits on a lock the open enqueue holds (this
        # test's database: the server is shared).
        while not settle.done() and not await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = "
                "current_database() AND wait_event_type = 'Lock')"):
            await asyncio.sleep(0.01)
        assert settle.done(), "the settle waits for the enqueue's commit"
        assert await settle
    finally:
        await other.execute("ROLLBACK")
        await other.close()
        await asyncio.gather(settle, return_exceptions=True)


async def test_a_follower_held_for_calibration_is_marked_after_the_release(
        store: Store, conn: asyncpg.Connection) -> None:
    # The first "oxygen" is checked first; its copy waits for the teacher's release, and
    # is marked then, even though its leader was marked long before.
    ids = await add_answers(conn, ["oxygen", "oxygen", "water"])
    out = enqueued(await store.enqueue(ids, "hw-1", 0, {"q": "1"}, answer_key=KEY,
                                       gate=GateAsked(submission_ids=(str(ids[0]),))))
    assert out.run_id is not None
    calls: Counter[str] = Counter()
    await drain(store, calls)
    assert sum(calls.values()) == 1  # the check only
    await store.calibration_release(out.run_id, "teacher")
    await drain(store, calls)
    got = await marks(conn, ids)
    assert None not in got.values()
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                               "WHERE status IN ('pending', 'processing')") == 0
