"""Nothing of a student's left at the provider (docs/overnight.md): each crash point of the
overnight lane against both providers' emulators, which end holding nothing of the app's.

A create whose answer is lost, a step killed between upload and create, a deletion
refused while a batch is still cancelling, a batch the provider forgot, results that
can't be read, an answer erased while its batch is packed; and the fallback's estimate
with the pool's live backlog and its learned limit L.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from aiqueue.batch.anthropic import AnthropicBatches
from aiqueue.batch.function import FunctionModes, Rendered
from aiqueue.batch.openai import OpenAIBatches
from aiqueue.batch.provider import Handle, Line
from aiqueue.queue.overnight import lane_times
from aiqueue.settings.kinds import DEFAULT_POOL
from tests.batchapi.common import Behaviour
from tests.batchapi.openai_api import OpenAIBatchAPI
from tests.conftest import add_submissions
from tests.integration.batch_kit import Rig, lane_rig, soon

pytestmark = pytest.mark.e2e


class Killed(BaseException):
    """The platform ends the step (nothing in the app catches it)."""


@pytest.fixture(params=["openai", "anthropic"])
async def rig(request: pytest.FixtureRequest, db_url: str, conn: asyncpg.Connection
              ) -> AsyncIterator[Rig]:
    async with lane_rig(request.param, db_url, conn, max_attempts=3) as out:
        yield out


def empty(rig: Rig) -> bool:
    return all(not v for v in rig.held().values())


async def finish(rig: Rig, steps: int = 3, **config: Any) -> None:
    """Let the provider answer and the lane apply and delete."""
    for _ in range(steps):
        rig.clock.advance(2)
        await rig.step(**config)


async def test_a_create_whose_answer_was_lost_is_found_by_its_tag(rig: Rig) -> None:
    await rig.enqueue(3)
    rig.emu.faults.create_delay = 1.5  # the batch is made; its answer comes too late
    first = await rig.step(call_seconds=0.3)
    assert first.packed == 0 and "provider_timeout" in first.errors
    rig.emu.faults.create_delay = 0
    second = await rig.step()
    assert (second.released, second.packed) == (0, 0)  # adopted, not packed again
    await finish(rig)
    assert await rig.statuses() == {"completed": 3}
    assert rig.emu.created == 1 and rig.emu.requests_answered == 3  # no line paid twice
    assert empty(rig), rig.held()


async def test_a_step_killed_between_upload_and_create_leaves_nothing(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    await rig.enqueue(3)
    cls: Any = OpenAIBatches if rig.provider == "openai" else AnthropicBatches

    async def killed(self: Any, lines: Any, tag: str, files: Any) -> Handle:
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(cls, "create", killed)
        with pytest.raises(Killed):
            await rig.step()
    if rig.provider == "openai":
        assert rig.held()["files"], "the input file was uploaded before the step died"
    again = await rig.step(submit_grace_seconds=0)
    assert again.released == 3 and again.packed == 3  # given back, then packed anew
    await finish(rig, submit_grace_seconds=0)
    assert await rig.statuses() == {"completed": 3}
    assert empty(rig), rig.held()
    states = {r["state"] for r in await rig.conn.fetch("SELECT state FROM ai_marking_batches")}
    assert states == {"abandoned", "done"}


async def test_a_refused_create_gives_its_rows_back_and_deletes_its_file(rig: Rig) -> None:
    await rig.enqueue(3)
    rig.emu.faults.refuse_create = True
    report = await rig.step()
    assert (report.packed, report.released) == (0, 3) and "provider_http_400" in report.errors
    assert empty(rig), rig.held()  # OpenAI's input file went at once
    rows = await rig.conn.fetch("SELECT status, attempts FROM ai_marking_queue")
    assert {(r["status"], r["attempts"]) for r in rows} == {("pending", 0)}
    assert await _state(rig) == "abandoned"
    rig.emu.faults.refuse_create = False
    await finish(rig)
    assert await rig.statuses() == {"completed": 3}
    assert empty(rig), rig.held()


async def test_a_deletion_refused_while_cancelling_is_asked_until_done(rig: Rig) -> None:
    subs = await add_submissions(rig.conn, 2, "hw-b", content="photosynthesis")
    await _enqueue(rig, subs)
    rig.fates[1] = Behaviour(stall=True, cancel_delay=30)
    rig.emu.faults.create_delay = 1.5
    await rig.step(call_seconds=0.3)  # the provider made the batch; the app lost its id
    rig.emu.faults.create_delay = 0
    await rig.rt.store.erase(subs, "api")  # meanwhile every row of it is erased
    await rig.step()  # found with no row left: withdrawn (cancelled), not deleted yet
    assert not empty(rig)
    rig.clock.advance(10)
    await rig.step()
    assert not empty(rig)  # still cancelling: the deletion waits
    await finish(rig, steps=20)
    assert empty(rig), rig.held()
    assert rig.emu.received and rig.emu.requests_answered == 0
    assert await rig.rt.store.batch_open_count() == 0


async def test_a_batch_the_provider_forgot_falls_back_at_once(rig: Rig) -> None:
    await rig.enqueue(3, deadline=soon(3600))
    assert (await rig.step()).packed == 3
    rig.emu.forget()
    report = await rig.step()
    assert report.fell_back == 3 and "provider_http_404" in report.errors
    rows = await rig.conn.fetch("SELECT status, lane, attempts FROM ai_marking_queue")
    assert {(r["status"], r["lane"], r["attempts"]) for r in rows} == {("pending", "live", 0)}
    await rig.step()
    assert empty(rig), rig.held()
    assert await rig.rt.store.batch_open_count() == 0


async def test_results_that_cant_be_read_fall_back_like_a_stalled_batch(rig: Rig) -> None:
    await rig.enqueue(3, deadline=soon(3600))
    await rig.step()
    rig.emu.faults.results_broken = True
    rig.clock.advance(2)
    first = await rig.step()
    assert first.fell_back == 0 and "provider_http_500" in first.errors  # time enough
    assert await rig.statuses() == {"processing": 3}
    late = await rig.step(margin_seconds=3600)  # its fallback point has come
    assert late.fell_back == 3
    await rig.step()
    assert empty(rig), rig.held()
    rows = await rig.conn.fetch("SELECT status, lane FROM ai_marking_queue")
    assert {(r["status"], r["lane"]) for r in rows} == {("pending", "live")}


async def test_an_answer_erased_while_its_batch_is_packed_is_never_uploaded(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    subs = await add_submissions(rig.conn, 3, "hw-b", content="photosynthesis")
    qids = await _enqueue(rig, subs)
    render = FunctionModes.render

    async def erasing(self: FunctionModes, *args: Any) -> Rendered:
        out = await render(self, *args)
        await rig.rt.store.erase(subs[:1], "api")  # erased while the batch is packed
        return out

    monkeypatch.setattr(FunctionModes, "render", erasing)
    assert (await rig.step()).packed == 2
    sent = {cid[:36] for cid in rig.emu.received}
    assert str(qids[0]) not in sent and {str(q) for q in qids[1:]} <= sent
    monkeypatch.undo()
    await finish(rig)
    assert await rig.statuses() == {"completed": 2}
    assert empty(rig), rig.held()


async def test_another_deployments_batch_is_never_adopted(db_url: str,
                                                         conn: asyncpg.Connection) -> None:
    # Only OpenAI's batches carry a tag (Anthropic's are known by their time and size).
    async with lane_rig("openai", db_url, conn) as rig:
        await _not_adopted(rig)


async def _not_adopted(rig: Rig) -> None:
    await rig.enqueue(2)
    cfg = rig.config
    rows = await rig.rt.store.batch_open(cfg.pool, rig.provider, cfg.model, 100)
    batch_id = rows[0].batch_id
    assert (await rig.rt.store.batch_tag(batch_id)).startswith("aiqueue-")
    # Another deployment on the same account, whose record has the same number.
    client = OpenAIBatches(f"{_base(rig)}", rig.emu.key)
    lines = [Line(r.custom_id, {"model": cfg.model, "messages": []}) for r in rows]
    for tag in (str(batch_id), f"aiqueue-0123456789abcdef-{batch_id}"):
        await client.create(lines, tag, await client.upload(lines, tag))
    await client.aclose()
    report = await rig.step(submit_grace_seconds=0)
    assert report.released == 2 and report.packed == 2  # not adopted: packed anew
    await finish(rig)
    assert await rig.statuses() == {"completed": 2}
    # The app's own files are gone; the other deployment's are left alone.
    ours = await rig.rt.store.batch_tag(batch_id)
    names = {f.filename for f in rig.emu.files.values()}  # type: ignore[union-attr]
    assert {f"{batch_id}.jsonl", f"aiqueue-0123456789abcdef-{batch_id}.jsonl"} <= names
    assert not any(n.startswith(ours.rsplit("-", 1)[0]) for n in names)


async def test_the_fallback_counts_the_live_backlog_and_L(rig: Rig) -> None:
    rig.fates[1] = Behaviour(stall=True)
    await rig.enqueue(4, deadline=soon(3600))
    lane = {"margin_seconds": 0, "poll_seconds": 300, "default_live_seconds": 30}
    await rig.step(**lane)
    # 4 rows at 30 s each, all at once: far from the deadline.
    assert await rig.statuses() == {"processing": 4}
    await rig.conn.execute("UPDATE ai_marking_batches SET look_after = now()")
    await rig.step(**lane)
    assert await _state(rig) == "submitted"
    # 200 live rows wait in the pool, and L is 1: 204 rows × 30 s pass the deadline.
    live = await add_submissions(rig.conn, 200, "hw-live")
    await rig.rt.store.enqueue(live, "hw-live", 0, {"rubric": "r", "max_score": 1})
    await rig.conn.execute("UPDATE ai_queue_control SET in_flight_limit = 1 "
                           "WHERE pool = 'default'")
    await rig.conn.execute("UPDATE ai_marking_batches SET look_after = now()")
    await rig.step(**lane)
    assert await _state(rig) == "cancelling"


async def test_the_next_look_comes_by_the_fallback_point(rig: Rig) -> None:
    rig.fates[1] = Behaviour(stall=True)
    await rig.enqueue(4, deadline=soon(2000))
    await rig.step(poll_seconds=3000, margin_seconds=0)
    await rig.conn.execute("UPDATE ai_marking_batches SET look_after = now()")
    await rig.step(poll_seconds=3000, margin_seconds=0)
    wait = await rig.conn.fetchval(
        "SELECT date_part('epoch', look_after - now()) FROM ai_marking_batches")
    # Deadline in 2000 s, 5 s of live work: the fallback point is ~1995 s away, not 3000.
    assert 1980 < wait <= 1996


async def _enqueue(rig: Rig, subs: list[Any]) -> list[Any]:
    batch = await lane_times(rig.rt, DEFAULT_POOL, None)
    out = await rig.rt.store.enqueue(subs, "hw-b", 0, {"rubric": "- chlorophyll",
                                                       "max_score": 10}, batch=batch)
    return list(out.queue_ids)  # type: ignore[union-attr]


async def _state(rig: Rig) -> str:
    return str(await rig.conn.fetchval("SELECT state FROM ai_marking_batches"))


def _base(rig: Rig) -> str:
    pool = rig.rt.settings.queue.pools[rig.config.pool]
    assert pool.batch_base_url
    return pool.batch_base_url


async def test_a_lost_create_is_found_behind_a_busy_accounts_newer_batches(
        db_url: str, conn: asyncpg.Connection) -> None:
    async with lane_rig("openai", db_url, conn, max_attempts=3) as rig:
        await rig.enqueue(3)
        rig.emu.faults.create_delay = 1.5  # the batch is made; its answer comes too late
        first = await rig.step(call_seconds=0.3)
        assert first.packed == 0 and "provider_timeout" in first.errors
        rig.emu.faults.create_delay = 0
        assert isinstance(rig.emu, OpenAIBatchAPI)
        # Meanwhile other deployments on the account made more than a page of batches.
        rig.emu.made_elsewhere(150)
        second = await rig.step()
        assert (second.released, second.packed) == (0, 0)  # adopted from the second page
        assert rig.emu.list_calls >= 2
        await finish(rig)
        assert await rig.statuses() == {"completed": 3}
        assert rig.emu.created == 1 and rig.emu.requests_answered == 3  # none paid twice
        assert rig.held()["open_batches"] == [] and rig.held()["files"] == []
