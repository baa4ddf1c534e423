"""A drift canary on the batch lane (docs/canaries.md): against both providers' batch API
emulators and the reference function's render and parse modes on loopback."""

from __future__ import annotations

import dataclasses

import asyncpg
import pytest

from aiqueue.models import Completed
from aiqueue.queue import canary
from aiqueue.runtime import Runtime
from aiqueue.settings.canary import Canary
from aiqueue.settings.kinds import DEFAULT_POOL, Kind, QueueConfig
from tests.batchapi.common import Behaviour, Clock
from tests.conftest import add_submissions
from tests.integration.batch_kit import FN_TOKEN, lane_settings, served


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_canary_on_the_batch_lane_is_marked_at_the_provider_and_cleaned_up(
        provider: str, db_url: str, conn: asyncpg.Connection) -> None:
    clock: Clock = Clock()
    with served(provider, clock, {1: Behaviour(delay=60)}) as (emu, emu_url, fn_url):
        base = lane_settings(provider, db_url, emu, emu_url, fn_url)
        assert base.queue_file is not None
        pool = base.queue_file.pools[DEFAULT_POOL]  # as the file declares it
        kind = Kind(name="mark", pool=DEFAULT_POOL, function_url=fn_url,
                    function_token=FN_TOKEN, canary=Canary(rows=6))
        s = dataclasses.replace(base, queue_file=QueueConfig({DEFAULT_POOL: pool},
                                                             {"mark": kind}))
        rt = await Runtime.create(s, db_url)
        try:
            # Six reviewed results of the kind: the teacher accepted each mark.
            ids = await add_submissions(conn, 6, "hw-c", content="chlorophyll")
            outcome = await rt.store.enqueue(ids, "hw-c", 0, {"rubric": "- names it",
                                                               "max_score": 10})
            for qid in outcome.queue_ids:  # type: ignore[union-attr]
                assert await rt.store.complete(Completed(qid, 0, {"score": 7, "max_score": 10},
                                                         {"model": "m-1"}), s.claim_plan)
                await rt.store.accept(qid, "t-1", None)
            before = await conn.fetch("SELECT id, ai_result::text FROM submissions ORDER BY id")

            run = await canary.run_now(rt, "mark")
            assert run.lane == "batch" and run.rows == 6
            await canary.send_now(rt, "mark")  # packed into one provider batch
            held = emu.held()
            assert (held.get("open_batches") or held.get("batches"))
            clock.advance(120)
            await canary.send_now(rt, "mark")  # ended: answers read, the batch deleted
            [done] = await rt.store.canary_runs("mark", 10)
            assert done.state == "finished" and done.answered == 6
            assert done.exact is not None and done.passed is True
            assert done.lane == "batch"
            # Nothing of the students' stays at the provider, nothing was applied.
            assert not any(emu.held().values())
            assert await conn.fetch(
                "SELECT id, ai_result::text FROM submissions ORDER BY id") == before
            rows = await conn.fetch("SELECT state, usage FROM ai_marking_canary_rows")
            assert {r["state"] for r in rows} == {"answered"}
        finally:
            await rt.close()
