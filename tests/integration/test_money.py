"""Turns by tokens (VTC) and spend caps that pause (docs/concepts.md), against a real PostgreSQL."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from aiqueue.db.store import Store
from aiqueue.models import MarkingEvent
from aiqueue.settings import ModelPrice
from aiqueue.settings.money import Money, PoolMoney
from tests.integration.money_kit import THRESHOLD, Model
from tests.plans import plan_of

CAP = 4


@pytest.fixture
def model(store: Store, conn: asyncpg.Connection) -> Model:
    return Model(store, conn)


async def _two_backlogged(model: Model) -> None:
    """Essays of 4,000 tokens and short answers of 400, both backlogged, CAP in flight."""
    await model.enqueue("essays", 60, 4000)
    await model.enqueue("short", 600, 400)
    # Counted once both have waited and the first estimates were corrected.
    await model.run_while_both_wait("essays", "short", {"essays": 60, "short": 600}, CAP)


async def test_two_backlogged_groups_get_half_the_tokens_each(model: Model):
    await _two_backlogged(model)
    assert model.share("essays") == pytest.approx(0.5, abs=0.05), model.tokens
    assert model.share("short") == pytest.approx(0.5, abs=0.05), model.tokens
    # VTC's guarantee: the service gap between two backlogged groups stays within a
    # bound set by the largest request (its weight 4,800 here), all along the run;
    # the queue charges at dispatch, so the rows in flight widen it by CAP of them.
    largest = 4000 * 4 // 5 + 2 * (4000 // 5)
    assert model.max_gap <= (2 + CAP) * largest, model.max_gap


async def test_without_usage_every_row_costs_alike_and_turns_go_by_rows(model: Model):
    # No usage reported: nothing corrects the estimates, every row is charged the
    # same, and the turns are the rows' (docs/integrating.md): about 91/9 of the tokens.
    model.report_usage = False
    await _two_backlogged(model)
    assert model.share("essays") == pytest.approx(4000 / 4400, abs=0.03), model.tokens


async def test_a_group_back_from_idleness_banks_no_credit(model: Model, store: Store):
    await model.enqueue("a", 40, 1000)
    await model.enqueue("b", 5, 1000)
    for _ in range(45):  # both drain: b empties early and goes idle
        await model.fill(1)
        await model.finish_one()
    await model.enqueue("a", 40, 1000, assignment="a2")
    await model.fill(1)
    await model.finish_one()
    # b comes back after a long idle stretch: it is lifted to a's counter and
    # takes turns with it, instead of catching up on the service it missed.
    await model.enqueue("b", 20, 1000, assignment="b2")
    model.rows.clear()
    for _ in range(20):
        await model.fill(1)
        await model.finish_one()
    assert abs(model.rows["a"] - model.rows["b"]) <= 2, model.rows


async def test_a_refused_dispatch_gives_its_charge_back(model: Model, store: Store,
                                                        conn: asyncpg.Connection):
    await model.enqueue("a", 2, 1000)
    job = await store.claim(plan_of(1, THRESHOLD))
    assert job is not None
    before = await conn.fetchval("SELECT counter FROM ai_marking_fair WHERE group_key = 'a'")
    assert before > 0
    assert await store.refused(job.queue_id, job.dispatch_seq, kind="rate_limited", delay=0,
                               give_up=3600, cap=1) == "pending"
    after = await conn.fetchval("SELECT counter FROM ai_marking_fair WHERE group_key = 'a'")
    assert after == 0


def _capped(usd_per_hour: float, hour_seconds: float) -> Money:
    pool = PoolMoney(caps={"group_usd_per_hour": usd_per_hour},
                     prices={"m": ModelPrice(1.0, 1.0)})
    return Money({"default": pool}, hour_seconds=hour_seconds, day_seconds=86400)


async def test_a_capped_group_pauses_until_its_window_rolls_over(model: Model, store: Store,
                                                                  conn: asyncpg.Connection):
    # Windows of 3 s stand in for hours; rows of both groups use 1,000 tokens
    # (so turns alternate), the teacher's cost $1 each, the other group's $0.01
    # (a cheaper model); the cap of every group is $5.
    window = 3.0
    model.money = _capped(5.0, window)
    model.usd_per_token = {"teacher": 1 / 1000, "other": 1 / 100_000}
    await model.enqueue("teacher", 40, 1000)
    await model.enqueue("other", 2000, 1000)
    served: dict[str, int] = {"teacher": 0, "other": 0}
    loop = asyncio.get_running_loop()
    start = loop.time()
    while loop.time() - start < 3 * window:
        await model.fill(CAP)
        if not model.in_flight:
            await asyncio.sleep(0.05)
            continue
        group = await model.finish_one()
        served[group] += 1
    # Spend per window: never above the cap plus what CAP rows in flight cost.
    spend = await conn.fetch(
        "SELECT starts_at, usd FROM ai_marking_spend "
        "WHERE group_key = 'teacher' AND span = 'hour' ORDER BY starts_at")
    assert len(spend) >= 2, spend  # it went on in the next window
    assert all(r["usd"] <= 5.0 + CAP * 1.0 + 1e-9 for r in spend), spend
    # Nothing failed; the other group marked all the while.
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue WHERE status = 'failed'") == 0
    # Paused most of each window: far fewer of the teacher's rows than turns
    # alone would have given it (every other one).
    assert served["teacher"] < served["other"] / 2, served
    # While paused, its rows say why and until when.
    paused = await conn.fetchrow(
        "SELECT capped_until, capped_by FROM ai_marking_fair WHERE group_key = 'teacher'")
    assert paused["capped_by"] in (None, "group_usd_per_hour")


async def test_a_paused_group_wakes_the_ticker_when_its_window_rolls_over(
        model: Model, store: Store, conn: asyncpg.Connection):
    window = 600.0  # a test that straddles a window's end is one in 6,000
    model.money = _capped(1.0, window)
    model.usd_per_token = {"teacher": 1 / 1000}
    await model.enqueue("teacher", 5, 1000)
    await model.fill(1)
    await model.finish_one()  # $1: the cap is reached
    assert await store.claim(plan_of(1, THRESHOLD, money=model.money)) is None
    row = await conn.fetchrow(
        "SELECT capped_until, capped_by, extract(epoch FROM capped_until - now()) AS left "
        "FROM ai_marking_fair WHERE group_key = 'teacher'")
    assert row["capped_by"] == "group_usd_per_hour"
    # Due rows, all paused: the ticker sleeps until the window ends, not 0 s.
    wait = await store.next_wakeup(plan_of(1, THRESHOLD), 600)
    assert wait is not None and wait == pytest.approx(float(row["left"]), abs=1.0)
    assert 0 < wait <= window
    # The queue list says why the rows wait, and until when.
    [listed] = await store.list_rows(status="pending", assignment_id=None, limit=1)
    assert listed.waiting_for == "spend_cap" and listed.resumes_at == row["capped_until"]


async def test_a_pause_is_one_live_event_per_assignment(model: Model, store: Store,
                                                       conn: asyncpg.Connection):
    model.money = _capped(1.0, 600.0)
    model.usd_per_token = {"teacher": 1 / 1000}
    await model.enqueue("teacher", 4, 1000)
    await model.fill(1)
    await model.finish_one()
    for _ in range(2):  # a second look at the paused group tells nobody again
        assert await store.claim(plan_of(1, THRESHOLD, money=model.money)) is None
    # Read from the feed itself: the stream hands an event out only once every
    # older transaction of the server has ended (other databases' too).
    rows = await conn.fetch(
        "SELECT tx::text AS tx, id, k, queue_id, submission_id, status, summary::text "
        "FROM ai_marking_event_feed WHERE assignment_id = 'teacher' ORDER BY id, k")
    paused = [e.to_json() for e in map(MarkingEvent.from_row, rows)
              if e.to_json().get("waiting_for")]
    assert len(paused) == 3  # the three rows still pending, in one feed row
    assert {e["waiting_for"] for e in paused} == {"spend_cap"}
    assert all(e["resumes_at"] and e["paused_by"] == "group_usd_per_hour" for e in paused)


async def test_old_spend_windows_are_pruned(store: Store, conn: asyncpg.Connection):
    await conn.execute(
        "INSERT INTO ai_marking_spend (pool, group_key, span, starts_at, usd) VALUES "
        "('default', 'g', 'day', now() - interval '3 days', 1), "
        "('default', 'g', 'hour', date_trunc('hour', now()), 1)")
    await conn.execute("UPDATE ai_queue_control SET last_prune_at = now() - interval '1 hour'")
    await store.prune(86400)
    assert await conn.fetchval("SELECT array_agg(span) FROM ai_marking_spend") == ["hour"]


async def test_a_replayed_row_lifts_its_idle_group_and_is_charged(model: Model, store: Store,
                                                                  conn: asyncpg.Connection):
    # b's only row fails; a is served meanwhile.  The replay (aiqueue_retry, whose
    # bulk move keeps the events' row trigger out) still puts b back in the walk,
    # lifted to a's counter: it banks no credit for the time its row lay failed.
    await model.enqueue("b", 1, 1000)
    job = await store.claim(plan_of(1, THRESHOLD))
    assert job is not None
    await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=False,
                               max_attempts=1, error="dispatch_failed", outcome="error")
    await model.enqueue("a", 5, 1000)
    for _ in range(5):
        await model.fill(1)
        await model.finish_one()
    a_counter = await conn.fetchval("SELECT counter FROM ai_marking_fair WHERE group_key = 'a'")
    assert await store.retry_all_failed(None, "test") == 1
    b = await conn.fetchrow("SELECT waiting, counter FROM ai_marking_fair WHERE group_key = 'b'")
    assert b["waiting"] and b["counter"] == pytest.approx(a_counter)
    # Its claim charges it as any row's.
    again = await store.claim(plan_of(1, THRESHOLD))
    assert again is not None and again.queue_id == job.queue_id
    charged = await conn.fetchval("SELECT counter FROM ai_marking_fair WHERE group_key = 'b'")
    assert charged > a_counter


async def test_a_replay_joins_each_group_once_and_its_rows_are_served_in_turn(
        model: Model, store: Store, conn: asyncpg.Connection) -> None:
    # 12 failed rows over three groups come back in one replay: the fair row
    # trigger stays out of the bulk move, and each group joins once (aiqueue 0023).
    for group in ("x", "y", "z"):
        await model.enqueue(group, 4, 100)
    await model.fill(12)
    for job in model.in_flight:
        await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=False,
                                   max_attempts=1, error="dispatch_failed", outcome="error")
    model.in_flight.clear()
    before = dict(await conn.fetch("SELECT group_key, joins FROM ai_marking_fair"))
    assert await store.retry_all_failed(None, "test") == 12
    fair = await conn.fetch(
        "SELECT f.group_key, f.joins, f.waiting, f.head_turn, f.head_seq, "
        "       (SELECT ARRAY[q.turn, q.seq] FROM ai_marking_queue q WHERE q.status = 'pending' "
        "        AND coalesce(q.group_key, q.assignment_id) = f.group_key "
        "        ORDER BY q.turn, q.seq LIMIT 1) AS first "
        "FROM ai_marking_fair f ORDER BY 1")
    for f in fair:
        assert f["waiting"] and f["joins"] == before[f["group_key"]] + 1
        assert (f["head_turn"], f["head_seq"]) == tuple(f["first"])
    # Every replayed row is claimed and charged, in turns across the groups.
    served = []
    while (got := await store.claim(plan_of(0, THRESHOLD))) is not None:
        served.append(model.of[got.submission_id])
    assert sorted(served) == ["x"] * 4 + ["y"] * 4 + ["z"] * 4
    assert set(served[:3]) == {"x", "y", "z"}
    assert not await conn.fetchval("SELECT bool_or(waiting) FROM ai_marking_fair")


async def test_rows_of_a_group_paused_at_a_spend_cap_are_not_claimable(
        model: Model, store: Store, conn: asyncpg.Connection) -> None:
    await model.enqueue("paused", 3, 100)
    await conn.execute("UPDATE ai_marking_fair SET capped_until = now() + interval '1 hour', "
                       "capped_by = 'group_hour' WHERE group_key = 'paused'")
    assert not await store.can_claim(plan_of(0, THRESHOLD))
    await model.enqueue("open", 2, 100)
    assert await store.can_claim(plan_of(0, THRESHOLD))
    # The claim's own "more?" leaves the paused group's rows out too.
    first = await store.claim(plan_of(0, THRESHOLD))
    assert first is not None and model.of[first.submission_id] == "open" and first.more
    last = await store.claim(plan_of(0, THRESHOLD))
    assert last is not None and model.of[last.submission_id] == "open" and not last.more
    assert not await store.can_claim(plan_of(0, THRESHOLD))
    await conn.execute("UPDATE ai_marking_fair SET capped_until = now() - interval '1 second'")
    assert await store.can_claim(plan_of(0, THRESHOLD))
