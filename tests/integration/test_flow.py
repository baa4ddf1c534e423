"""Flow control (docs/concepts.md) against a real PostgreSQL, through the Store."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg

from aiqueue import flow
from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed
from tests.conftest import add_submissions
from tests.plans import Budget, plan_of, settle_one
from tests.unit.flow_cases import PACED_CASES, REFUSAL_CASES, RESULT_CASES

THRESHOLD, DAY = 5, 86400.0


async def control(conn: asyncpg.Connection) -> asyncpg.Record:
    row = await conn.fetchrow("SELECT * FROM ai_queue_control WHERE id = 1")
    assert row is not None
    return row


async def test_the_database_rule_is_the_documented_one(conn: asyncpg.Connection) -> None:
    """aiqueue/flow.py is the spec; db/sql/functions/20_flow.sql computes the same, case by case."""
    for limit, top, in_flight, same_burst, expected in REFUSAL_CASES:
        got = await conn.fetchval("SELECT aiqueue_flow_after_refusal($1, $2, $3, $4)",
                                  limit, top, in_flight, same_burst)
        assert got == expected, (limit, top, in_flight, same_burst)
    for limit, clean, top, paced, expected_pair in RESULT_CASES:
        row = await conn.fetchrow("SELECT * FROM aiqueue_flow_after_result($1, $2, $3, $4)",
                                  limit, clean, top, paced)
        assert (row["new_limit"], row["new_clean"]) == expected_pair, (limit, clean, top, paced)
    for cut, raised, window, expected in PACED_CASES:
        await conn.execute(
            "UPDATE ai_queue_control SET limit_cut_at = now() - make_interval(secs => $1),"
            " limit_raised_at = now() - make_interval(secs => $2), learned_window = $3"
            " WHERE id = 1", cut, raised, window)
        got = await conn.fetchval("SELECT aiqueue_flow_paced(c) FROM ai_queue_control c"
                                  " WHERE id = 1")
        now = datetime.now(UTC)
        changed = [now - timedelta(seconds=s) for s in (cut, raised) if s is not None]
        assert got == flow.paced(max(changed, default=None), window, now) == expected, (
            cut, raised, window)


async def test_a_refusal_uses_no_attempt_holds_the_whole_queue_and_cuts_the_limit(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 6)
    await store.enqueue(ids, "hw-1", 0, {})
    jobs = [await store.claim(plan_of(8, THRESHOLD)) for _ in range(4)]
    assert all(jobs)
    first = jobs[0]
    assert first is not None
    status = await store.refused(first.queue_id, first.dispatch_seq, kind="rate_limited",
                                 delay=30, give_up=DAY, cap=8)
    assert status == "pending"
    row = await conn.fetchrow("SELECT status, attempts, last_error, refused_since IS NOT NULL"
                              " AS refused FROM ai_marking_queue WHERE queue_id = $1",
                              first.queue_id)
    assert tuple(row) == ("pending", 0, "rate_limited", True)
    ctl = await control(conn)
    assert ctl["in_flight_limit"] == 2  # 4 were in flight: halved
    assert ctl["refusals_rate_limited"] == 1 and ctl["refusals_overloaded"] == 0
    # The whole queue waits, not only the refused row: two rows are due and slots free.
    assert await store.claim(plan_of(8, THRESHOLD)) is None
    # The rest of the burst (sent before the cut) cuts nothing more.
    for job in jobs[1:3]:
        assert job is not None
        assert await store.refused(job.queue_id, job.dispatch_seq, kind="overloaded",
                                   delay=5, give_up=DAY, cap=8) == "pending"
    ctl = await control(conn)
    assert ctl["in_flight_limit"] == 2 and ctl["refusals_overloaded"] == 2
    state = await store.flow_state(8, 60)
    assert state.in_flight_limit == 2 and state.hold_until is not None
    # The hold over: one row is still out, so L = 2 lets exactly one more go.
    await conn.execute("UPDATE ai_queue_control SET busy_until = now() - interval '1 second'")
    await conn.execute("UPDATE ai_marking_queue SET run_after = now()")
    assert await store.claim(plan_of(8, THRESHOLD)) is not None
    assert await store.claim(plan_of(8, THRESHOLD)) is None
    # A refusal of a dispatch sent after the cut is a new burst: L halves again.
    late = await conn.fetchrow("SELECT queue_id, dispatch_seq FROM ai_marking_queue"
                               " WHERE status = 'processing' ORDER BY started_at DESC LIMIT 1")
    await store.refused(late["queue_id"], late["dispatch_seq"], kind="rate_limited", delay=0,
                        give_up=DAY, cap=8)
    assert (await control(conn))["in_flight_limit"] == 1


async def test_results_raise_the_limit_back_to_the_cap(
    store: Store, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 30)
    await store.enqueue(ids, "hw-1", 0, {})
    await conn.execute("UPDATE ai_queue_control SET in_flight_limit = 1")
    seen = []
    for _ in range(30):
        job = await store.claim(plan_of(4, THRESHOLD))
        assert job is not None
        assert await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                                    plan_of(4))
        seen.append((await control(conn))["in_flight_limit"])
    # 1 result at 1, 2 at 2, then 3 results at 3 reach the cap: cleared.
    assert seen[:6] == [2, 2, 3, 3, 3, None] and seen[-1] is None


async def test_two_instances_claiming_at_once_never_exceed_the_learned_limit(
    db_url: str, conn: asyncpg.Connection
) -> None:
    ids = await add_submissions(conn, 60)
    a, b = Store(await connect_pool(db_url, max_size=4)), Store(await connect_pool(db_url,
                                                                              max_size=4))
    try:
        await a.enqueue(ids, "hw-1", 0, {})
        await conn.execute("UPDATE ai_queue_control SET in_flight_limit = 3")
        for _ in range(5):
            # Both instances race for slots under cap 8, as webhooks would.
            claims = await asyncio.gather(*[s.claim(plan_of(8, THRESHOLD)) for s in (a, b) * 6])
            assert sum(j is not None for j in claims) == 3
            assert await conn.fetchval(
                "SELECT count(*) FROM ai_marking_queue WHERE status = 'processing'") == 3
            done = [j for j in claims if j is not None]
            settled = await asyncio.gather(*[
                settle_one((a, b)[k % 2],
                           Completed(j.queue_id, j.dispatch_seq, {"score": 1}, None),
                           plan_of(8, THRESHOLD))
                for k, j in enumerate(done)])
            # Each result claims the next row in its own transaction; L still binds.
            # (3 results at L = 3 raise it to 4 on the way: one more row goes.)
            limit = (await control(conn))["in_flight_limit"]
            busy = await conn.fetchval(
                "SELECT count(*) FROM ai_marking_queue WHERE status = 'processing'")
            assert busy <= (limit or 8) and busy == sum(j is not None for _, j in settled)
            for _applied, job in settled:
                if job is not None:
                    await a.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, None),
                                     plan_of(8))
            await conn.execute("UPDATE ai_queue_control SET in_flight_limit = 3,"
                               " limit_clean = 0")
    finally:
        await a.close()
        await b.close()


async def test_a_row_refused_for_too_long_fails_as_rate_limited(
    store: Store, conn: asyncpg.Connection
) -> None:
    (sub,) = await add_submissions(conn, 1)
    await store.enqueue([sub], "hw-1", 0, {})
    job = await store.claim(plan_of(1, THRESHOLD))
    assert job is not None
    assert await store.refused(job.queue_id, job.dispatch_seq, kind="overloaded", delay=0,
                               give_up=60, cap=1) == "pending"
    # Still refused a minute after the first refusal: give up.
    await conn.execute("UPDATE ai_marking_queue SET refused_since = now() - interval '61 s'")
    job = await store.claim(plan_of(1, THRESHOLD))
    assert job is not None
    assert await store.refused(job.queue_id, job.dispatch_seq, kind="overloaded", delay=0,
                               give_up=60, cap=1) == "failed"
    row = await conn.fetchrow("SELECT status, last_error, attempts FROM ai_marking_queue")
    assert tuple(row) == ("failed", "rate_limited", 0)
    # A manual retry starts the clock again.
    assert await store.retry_failed(job.queue_id, "test")
    assert await conn.fetchval("SELECT refused_since FROM ai_marking_queue") is None


async def test_the_budget_window_holds_dispatches_and_learns_from_usage(
    store: Store, conn: asyncpg.Connection
) -> None:
    first = await add_submissions(conn, 4, "hw-1")
    other = await add_submissions(conn, 2, "hw-2")
    await store.enqueue(first, "hw-1", 0, {})
    # 3000 tokens per 10 s: three rows at the first guess of 1000 tokens each.
    budget = Budget(tokens_per_minute=18000, requests_per_minute=0, window_seconds=10)
    jobs = [await store.claim(plan_of(0, THRESHOLD, budget=budget)) for _ in range(4)]
    assert all(jobs[:3]) and jobs[3] is None
    state = await store.flow_state(0, 10)
    assert (state.tokens_in_window, state.requests_in_window) == (3000, 3)
    wait = await store.next_wakeup(plan_of(0, THRESHOLD, budget=budget), 600)
    assert wait is not None and 9 < wait <= 10  # when the first entry leaves the window
    # The reported usage replaces the estimate: room for the fourth row now.
    job = jobs[0]
    assert job is not None
    usage = {"prompt_tokens": 300, "completion_tokens": 100}
    assert await store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, usage),
                                plan_of(0, budget=budget))
    assert (await store.flow_state(0, 10)).tokens_in_window == 2400
    fourth = await store.claim(plan_of(0, THRESHOLD, budget=budget))
    assert fourth is not None
    assert await conn.fetchval("SELECT tokens FROM ai_marking_budget WHERE queue_id = $1",
                               fourth.queue_id) == 400  # its assignment's recent usage
    # Another assignment without history borrows any assignment's figure.
    await store.enqueue(other, "hw-2", 0, {})
    assert await conn.fetchval("SELECT aiqueue_budget_estimate('hw-2')") == 400
    assert await conn.fetchval("SELECT aiqueue_budget_estimate('hw-1')") == 400
    # A refused call used no tokens but still counts as a request.
    assert await store.refused(fourth.queue_id, fourth.dispatch_seq, kind="rate_limited",
                               delay=0, give_up=DAY, cap=0) == "pending"
    state = await store.flow_state(0, 10)
    assert (state.tokens_in_window, state.requests_in_window) == (2400, 4)


async def test_a_request_budget_counts_dispatches(store: Store, conn: asyncpg.Connection) -> None:
    ids = await add_submissions(conn, 5)
    await store.enqueue(ids, "hw-1", 0, {})
    budget = Budget(tokens_per_minute=0, requests_per_minute=12, window_seconds=10)
    claims = [await store.claim(plan_of(0, THRESHOLD, budget=budget)) for _ in range(3)]
    assert [j is not None for j in claims] == [True, True, False]
    await conn.execute("UPDATE ai_marking_budget SET at = at - interval '11 s'")
    assert await store.claim(plan_of(0, THRESHOLD, budget=budget)) is not None


async def test_a_retried_row_gets_a_fresh_turn(store: Store, conn: asyncpg.Connection) -> None:
    """Retry puts a row behind the groups already waiting, as an enqueue would."""
    a = await add_submissions(conn, 2, "a")
    await store.enqueue(a, "a", 0, {})
    for _ in range(2):
        job = await store.claim(plan_of(0, THRESHOLD))
        assert job is not None
        await store.attempt_failed(job.queue_id, job.dispatch_seq, delay=0, retryable=False,
                                   max_attempts=3, error="e", outcome="callback_failed")
    b = await add_submissions(conn, 3, "b")
    c = await add_submissions(conn, 3, "c")
    await store.enqueue(b, "b", 0, {})
    await store.enqueue(c, "c", 0, {})
    assert await store.retry_all_failed(None, "teacher") == 2
    order = []
    while (job := await store.claim(plan_of(0, THRESHOLD))) is not None:
        order.append(job.assignment_id)
    # One row per group per round, the retried group joining last: not a, a first.
    assert order == ["b", "c", "a", "b", "c", "a", "b", "c"]
