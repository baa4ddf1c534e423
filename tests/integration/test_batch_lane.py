"""The overnight lane (docs/overnight.md) against a real PostgreSQL, both provider emulators and the
reference function's render/parse modes, all on loopback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import pytest

from aiqueue.batch.connect import connect
from aiqueue.batch.function import FunctionModes
from aiqueue.batch.provider import Line, submit
from aiqueue.models import Completed
from aiqueue.models.batch import BatchRow
from aiqueue.queue.overnight import job_body
from aiqueue.queue.spend import cost_usd
from tests.batchapi.common import Behaviour, LineFate
from tests.conftest import add_submissions
from tests.integration.batch_kit import Rig, lane_rig, soon
from tests.plans import plan_of

pytestmark = pytest.mark.e2e
MAX = 3


@pytest.fixture(params=["openai", "anthropic"])
async def rig(request: pytest.FixtureRequest, db_url: str, conn: asyncpg.Connection
              ) -> AsyncIterator[Rig]:
    async with lane_rig(request.param, db_url, conn, max_attempts=MAX) as out:
        yield out


async def test_a_healthy_batch_marks_every_row_once_at_half_price(rig: Rig) -> None:
    await rig.enqueue(30)
    first = await rig.step()
    assert (first.packed, first.batches) == (30, 1)
    rows = await rig.conn.fetch(
        "SELECT status, lane, c.lease_at, batch_id FROM ai_marking_queue q"
        " LEFT JOIN ai_marking_claimed c ON c.queue_id = q.queue_id")
    # In a batch: processing, on the batch lane, holding no slot of L.
    assert {(r["status"], r["lane"], r["lease_at"]) for r in rows} == {
        ("processing", "batch", None)}
    assert await rig.rt.store.claim(plan_of(4, 5)) is None  # nothing for the live claim
    rig.clock.advance(2)
    second = await rig.step()
    assert (second.applied, second.deleted, second.packed) == (30, 1, 0)
    assert await rig.statuses() == {"completed": 30}
    marked = await rig.conn.fetchval(
        "SELECT count(*) FROM submissions WHERE ai_result->>'score' = '5'")
    assert marked == 30
    assert await rig.conn.fetchval("SELECT count(*) FROM ai_marking_results") == 30
    # Cost: the batch price, half of what the same tokens cost live.
    for r in await rig.conn.fetch("SELECT usage FROM ai_marking_queue"):
        usage = json.loads(r["usage"])
        live = cost_usd({k: v for k, v in usage.items() if k != "cost_usd"},
                        rig.rt.settings.model_prices)
        assert live and usage["cost_usd"] == pytest.approx(live / 2)
    assert all(not v for v in rig.held().values()), rig.held()
    assert await rig.rt.store.batch_open_count() == 0
    # The usage report splits cost by lane: every result here is the batch lane's.
    lanes = dict(await rig.conn.fetch("SELECT lane, count(*) FROM ai_marking_results "
                                      "GROUP BY lane"))
    assert lanes == {"batch": 30}
    # A finished batch's record (ids only) goes after 30 days.
    await rig.conn.execute("UPDATE ai_marking_batches SET deleted_at = now() - interval '29 days'")
    await rig.step()
    assert await rig.conn.fetchval("SELECT count(*) FROM ai_marking_batches") == 1
    await rig.conn.execute("UPDATE ai_marking_batches SET deleted_at = now() - interval '31 days'")
    await rig.step()
    assert await rig.conn.fetchval("SELECT count(*) FROM ai_marking_batches") == 0


async def test_errored_and_expired_lines_use_an_attempt_and_go_to_the_next_batch(
        rig: Rig) -> None:
    ids = [str(i) for i in await rig.enqueue(6)]
    bad: dict[str, LineFate] = {ids[0]: "error", ids[1]: "expire"}
    rig.fates[1] = Behaviour(delay=1, line=lambda cid, body: bad.get(cid[:36], "ok"))
    await rig.step()
    rig.clock.advance(3601)  # the emulated provider's window closes: line 2 expires
    report = await rig.step()
    assert report.applied == 4 and report.failed_lines == 2
    # ...and the same step packs them again.
    assert (report.packed, report.batches) == (2, 1)
    rig.clock.advance(2)
    await rig.step()
    assert await rig.statuses() == {"completed": 6}
    attempts = dict(await rig.conn.fetch(
        "SELECT queue_id::text, attempts FROM ai_marking_queue"))
    assert attempts[ids[0]] == attempts[ids[1]] == 2
    assert all(not v for v in rig.held().values())


async def test_a_batch_that_fails_after_creation_sends_its_rows_to_the_next(rig: Rig) -> None:
    await rig.enqueue(5)
    rig.fates[1] = Behaviour(fail=True)
    await rig.step()
    report = await rig.step()
    # OpenAI fails the batch as a whole: not the rows' failure, so no attempt is used.
    # Anthropic has no failed batch: it errors every line, each using an attempt.
    whole = rig.provider == "openai"
    assert (report.failed_lines, report.released) == ((0, 5) if whole else (5, 0))
    assert report.packed == 5
    rig.clock.advance(2)
    await rig.step()
    assert await rig.statuses() == {"completed": 5}
    attempts = {r["attempts"] for r in await rig.conn.fetch(
        "SELECT attempts FROM ai_marking_queue")}
    assert attempts == ({1} if whole else {2})
    assert all(not v for v in rig.held().values())


async def test_lines_that_keep_failing_end_failed_after_max_attempts(rig: Rig) -> None:
    await rig.enqueue(2)
    for n in range(1, MAX + 1):
        rig.fates[n] = Behaviour(delay=0, line=lambda cid, body: "error")
    for _ in range(MAX + 1):
        await rig.step()
    assert await rig.statuses() == {"failed": 2}
    assert all(not v for v in rig.held().values())


async def test_a_stalled_batch_falls_back_to_live_before_the_deadline(rig: Rig) -> None:
    rig.fates[1] = Behaviour(stall=True)
    await rig.enqueue(4, deadline=soon(3600))
    assert (await rig.step()).packed == 4
    assert (await rig.step()).fell_back == 0  # an hour is plenty
    # The margin grows past the time left: the batch is cancelled...
    assert (await rig.step(margin_seconds=3600)).fell_back == 0
    # ...and once the cancel is through, what it stopped goes live.
    assert (await rig.step()).fell_back == 4
    rows = await rig.conn.fetch("SELECT status, lane, batch_id FROM ai_marking_queue")
    assert {tuple(r) for r in rows} == {("pending", "live", None)}
    # Packing's charge is given back (the live dispatches charge anew), and the
    # group waits for its turn again: the live claim serves it.
    fair = await rig.conn.fetch("SELECT counter, waiting FROM ai_marking_fair")
    assert [tuple(r) for r in fair] == [(0.0, True)]
    jobs = [await rig.rt.store.claim(plan_of(4, 5)) for _ in range(4)]
    assert all(j is not None and j.attempt == 1 for j in jobs)  # the batch's attempt is back
    assert all(not v for v in rig.held().values()), rig.held()


async def test_lines_answered_while_the_cancel_runs_are_applied_not_marked_again(
        rig: Rig) -> None:
    rig.fates[1] = Behaviour(delay=10, cancel_delay=600)
    await rig.enqueue(3, deadline=soon(3600))
    await rig.step()
    await rig.step(margin_seconds=3600)  # cancel
    rig.clock.advance(601)  # every line finished while the cancel ran
    report = await rig.step()
    assert (report.applied, report.fell_back) == (3, 0)  # paid once, marked once
    assert await rig.statuses() == {"completed": 3}
    assert all(not v for v in rig.held().values())


async def test_first_result_wins_when_a_fallen_back_row_is_answered_by_both(rig: Rig) -> None:
    rig.fates[1] = Behaviour(delay=1, cancel_delay=600)
    [qid] = await rig.enqueue(1, deadline=soon(3600))
    await rig.step()
    await rig.step(margin_seconds=3600)  # cancel...
    # ...which takes longer than the time left: the row goes live meanwhile.
    assert (await rig.step(default_live_seconds=4000)).fell_back == 1
    job = await rig.rt.store.claim(plan_of(4, 5))
    assert job is not None
    rig.clock.advance(601)  # the batch answers the line too (the cancel came too late)
    report = await rig.step()
    assert report.applied == 1
    # The live answer arrives second: not applied again.
    assert not await rig.rt.store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1},
                                                     None), plan_of(4))
    assert await rig.conn.fetchval("SELECT count(*) FROM ai_marking_results") == 1
    assert await rig.conn.fetchval(
        "SELECT ai_result->>'score' FROM submissions s JOIN ai_marking_queue q "
        "ON q.submission_id = s.id WHERE q.queue_id = $1", qid) == "5"
    assert all(not v for v in rig.held().values())


async def test_a_crash_before_the_provider_heard_gives_the_rows_back(rig: Rig) -> None:
    await rig.enqueue(3)
    cfg = rig.config
    # The step records the batch and moves its rows, then dies.
    rows = await rig.rt.store.batch_open(cfg.pool, rig.provider, cfg.model, 100)
    assert len(rows) == 3
    in_batch = await rig.conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE batch_id IS NOT NULL")
    assert in_batch == 3  # waiting rows are never in no batch
    report = await rig.step(submit_grace_seconds=0)
    assert report.released == 3 and "not_created" in report.errors
    assert report.packed == 3  # and the same step packs them anew
    rig.clock.advance(2)
    await rig.step()
    assert await rig.statuses() == {"completed": 3}
    attempts = {r["attempts"] for r in await rig.conn.fetch(
        "SELECT attempts FROM ai_marking_queue")}
    assert attempts == {1}  # the lost packing used no attempt
    assert all(not v for v in rig.held().values())


async def test_a_crash_after_the_provider_created_the_batch_adopts_it(rig: Rig) -> None:
    await rig.enqueue(3)
    cfg = rig.config
    rows = await rig.rt.store.batch_open(cfg.pool, rig.provider, cfg.model, 100)
    rendered = await _render(rig, rig.provider, rows)
    pool = rig.rt.settings.queue.pools[cfg.pool]
    assert pool.batch is not None and pool.batch_base_url and pool.batch_api_key
    client = connect(pool.batch, pool.batch_base_url, pool.batch_api_key)
    tag = await rig.rt.store.batch_tag(rows[0].batch_id)
    await submit(client, rendered, tag=tag)  # then the step dies
    await client.aclose()
    report = await rig.step(submit_grace_seconds=0)
    assert report.released == 0 and report.packed == 0  # adopted, not packed twice
    rig.clock.advance(2)
    await rig.step()
    assert await rig.statuses() == {"completed": 3}
    batches = await rig.conn.fetchval(
        "SELECT count(DISTINCT dispatch_ref) FROM ai_marking_attempts")
    assert batches == 1  # no row was ever in two batches
    assert all(not v for v in rig.held().values())


async def _render(rig: Rig, provider: str, rows: list[BatchRow]) -> list[Line]:
    modes = FunctionModes(rig.rt.http, rig.rt.settings.target())
    out = await modes.render(provider, rig.config.model, [job_body(rig.rt, r) for r in rows])
    return [Line(r.custom_id, out.requests[str(r.queue_id)]) for r in rows]


async def test_an_erased_row_in_a_batch_never_gets_its_result(rig: Rig) -> None:
    qids = await rig.enqueue(2)
    await rig.step()
    await rig.conn.execute("DELETE FROM ai_marking_queue WHERE queue_id = $1", qids[0])
    rig.clock.advance(2)
    report = await rig.step()
    assert report.applied == 1
    assert await rig.conn.fetchval(
        "SELECT count(*) FROM submissions WHERE ai_result IS NOT NULL") == 1
    assert all(not v for v in rig.held().values())


async def test_rows_in_a_batch_hold_no_live_slot(rig: Rig) -> None:
    await rig.enqueue(5)
    assert (await rig.step()).packed == 5
    live = await add_submissions(rig.conn, 1, "hw-live")
    await rig.rt.store.enqueue(live, "hw-live", 0, {"rubric": "r", "max_score": 1})
    # L = 1: five rows processing in a batch, and the live row still gets the slot.
    job = await rig.rt.store.claim(plan_of(1, 5))
    assert job is not None and job.submission_id == live[0]
    assert await rig.rt.store.claim(plan_of(1, 5)) is None  # and that one slot is all there is


async def test_the_lane_packs_only_its_own_pools_rows(rig: Rig) -> None:
    qids = await rig.enqueue(3)
    # One row belongs to another pool: the default pool's lane leaves it waiting.
    await rig.conn.execute("UPDATE ai_marking_queue SET pool = 'other' WHERE queue_id = $1",
                           qids[0])
    assert (await rig.step()).packed == 2
    assert await rig.conn.fetchval(
        "SELECT status FROM ai_marking_queue WHERE queue_id = $1", qids[0]) == "pending"
