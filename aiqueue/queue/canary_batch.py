"""A drift canary on the batch lane (docs/canaries.md): its rows in one provider batch.

The kind's function renders the rows (its `render` mode, as for the overnight
lane), the pool's provider takes them as one batch tagged for this run, and
its answers come back through the function's `parse` mode as canary items
(canary tokens), recorded like a live canary's.  The batch is recorded
'submitting' before it is asked for, so an answer lost on the way is looked
for by its tag; once its answers are read (or it failed), what the provider
keeps is deleted.  A row the batch did not answer ends failed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from uuid import UUID

from aiqueue import logs
from aiqueue.batch.connect import connect
from aiqueue.batch.function import FunctionModeError, FunctionModes
from aiqueue.batch.provider import UNSURE, Handle, Line, Polled, Provider, ProviderError
from aiqueue.models.canary import CanaryBatch
from aiqueue.ports import CanaryStore
from aiqueue.queue import canary_send
from aiqueue.runtime import Runtime
from aiqueue.settings.kinds import Pool

# A 'submitting' record older than this is reconciled (its step is gone).
SUBMIT_GRACE_SECONDS = 300.0
# How long one call to the provider may take.
CALL_SECONDS = 20.0


def _custom_id(row_id: UUID) -> str:
    return row_id.hex  # 32 of [0-9a-f]: fits both providers' custom_id


async def step(rt: Runtime[CanaryStore]) -> bool:
    """Pack, look at and clean every batch-lane canary's batch; whether a row ended."""
    ended = False
    for work in await rt.store.canary_batch_runs():
        pool = rt.settings.queue.pools.get(work.pool)
        if pool is None or pool.batch is None or work.kind not in rt.settings.queue.kinds:
            # The pool no longer declares a batch API: the canary ends without its rows.
            ended |= bool(await rt.store.canary_fail_open(work.run_id, "batch_unavailable"))
            if work.state is not None:
                await rt.store.canary_batch_record(work.run_id, "done")
            continue
        provider = await asyncio.to_thread(connect, pool.batch, pool.batch_base_url or "",
                                           pool.batch_api_key or "", CALL_SECONDS)
        try:
            ended |= await _one(rt, work, pool, provider)
        except (ProviderError, FunctionModeError) as exc:
            logs.event("canary_batch", run_id=work.run_id, kind=work.kind, code=exc.code)
        finally:
            await provider.aclose()
    return ended


async def _one(rt: Runtime[CanaryStore], work: CanaryBatch, pool: Pool,
               provider: Provider) -> bool:
    if work.state is None and work.running:
        return await _pack(rt, work, pool, provider)
    handle = Handle(work.batch_id or "", work.files)
    if work.state == "submitting":
        return await _reconcile(rt, work, provider)
    if work.state == "submitted":
        return await _look(rt, work, pool, provider, handle)
    if work.state == "deleting" and await provider.delete(handle):
        await rt.store.canary_batch_record(work.run_id, "done")
    return False


async def _pack(rt: Runtime[CanaryStore], work: CanaryBatch, pool: Pool,
                provider: Provider) -> bool:
    """Render the run's rows and create its batch (upload, then create, each recorded)."""
    tag = f"aiqueue-canary-{work.run_id.hex[:24]}"
    jobs = await rt.store.canary_batch_take(work.run_id, tag)
    if not jobs:
        return False  # another instance took them first (or none is left to send)
    target = rt.settings.target(work.kind)
    modes = FunctionModes(rt.http, target)
    rendered = await modes.render(pool.batch or "openai", pool.batch_model or "",
                                  [canary_send.body(j, target, rt.tokens) for j in jobs])
    ended = False
    for raw in rendered.items:  # jobs the function could not render: their failure
        answer = canary_send.parse_answer(raw, rt.tokens)
        ended |= answer is not None and bool(await canary_send.record(rt, answer))
    lines = [Line(_custom_id(UUID(qid)), body) for qid, body in rendered.requests.items()]
    if not lines:
        await rt.store.canary_fail_open(work.run_id, "batch_nothing_rendered")
        await rt.store.canary_batch_record(work.run_id, "done")
        return True
    files: tuple[str, ...] = ()
    try:
        files = await provider.upload(lines, tag)
        await rt.store.canary_batch_record(work.run_id, "submitting", None, list(files))
        handle = await provider.create(lines, tag, files)
    except ProviderError as exc:
        if exc.code in UNSURE:
            raise  # the provider may have it: the reconcile looks for it by its tag
        if files:
            await provider.delete_files(files)
        await rt.store.canary_fail_open(work.run_id, f"batch_{exc.code}")
        await rt.store.canary_batch_record(work.run_id, "done")
        return True
    await rt.store.canary_batch_record(work.run_id, "submitted", handle.batch_id,
                                       list(handle.files))
    logs.event("canary_batch", run_id=work.run_id, kind=work.kind, rows=len(lines),
               outcome="submitted")
    return ended


async def _reconcile(rt: Runtime[CanaryStore], work: CanaryBatch, provider: Provider
                     ) -> bool:
    """A 'submitting' record whose step is gone: adopt the batch its tag finds, else clear
    what the provider keeps and end the rows."""
    since = work.since.timestamp() if work.since else 0.0
    if time.time() - since < SUBMIT_GRACE_SECONDS or work.tag is None:
        return False
    found = await provider.find(work.tag, work.rows, since - 60)
    if found is not None:
        await rt.store.canary_batch_record(work.run_id, "submitted", found.batch_id,
                                           list(found.files))
        return False
    files = tuple(dict.fromkeys(work.files + await provider.leftovers(work.tag)))
    if files:
        await provider.delete_files(files)
    await rt.store.canary_fail_open(work.run_id, "batch_submit_lost")
    await rt.store.canary_batch_record(work.run_id, "done")
    return True


async def _look(rt: Runtime[CanaryStore], work: CanaryBatch, pool: Pool, provider: Provider,
                handle: Handle) -> bool:
    """Poll the batch; once it ended, record its answers, end the rest, delete it."""
    polled = await provider.poll(handle)
    if polled.state == "running":
        return False
    if polled.state == "ended":
        await _answers(rt, work, pool, polled, provider)
    await rt.store.canary_fail_open(
        work.run_id, "batch_failed" if polled.state == "failed" else f"batch_{polled.missing}")
    gone = await provider.delete(polled.handle)
    await rt.store.canary_batch_record(work.run_id, "done" if gone else "deleting")
    return True


async def _answers(rt: Runtime[CanaryStore], work: CanaryBatch, pool: Pool, polled: Polled,
                   provider: Provider) -> None:
    responses: list[dict[str, Any]] = []
    for outcome in await provider.results(polled):
        try:
            row_id = UUID(hex=outcome.custom_id)
        except ValueError:
            continue  # not a line of this canary's
        if outcome.kind == "succeeded" and outcome.response is not None:
            responses.append({"queue_id": str(row_id), "callback_token": rt.tokens.canary(row_id),
                              "response": outcome.response})
        else:
            await canary_send.record(rt, canary_send.CanaryAnswer(
                row_id, "failed", error=outcome.error or "batch_line_error"))
    if responses:
        modes = FunctionModes(rt.http, rt.settings.target(work.kind))
        for raw in await modes.parse(pool.batch or "openai", responses):
            answer = canary_send.parse_answer(raw, rt.tokens)
            if answer is not None:
                await canary_send.record(rt, answer)
