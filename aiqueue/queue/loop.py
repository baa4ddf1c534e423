"""The queue's heartbeat: one entry per trigger, and the loop alone decides what runs next.

The triggers: after an enqueue, after results (the webhook), after a read, on
a process or cron call, after a manual action or a cancel.  Each runs after
the response was sent; errors are logged, never raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from aiqueue import dispatch, logs
from aiqueue.errors import StoreError
from aiqueue.models import Job
from aiqueue.notify import delivery
from aiqueue.ports import LoopStore
from aiqueue.queue import (
    calibration,
    canary,
    fallback,
    hold,
    housekeeping,
    overnight,
    step_parts,
)
from aiqueue.queue.handout import send_sync
from aiqueue.queue.step_parts import StepResult
from aiqueue.runtime import Runtime


@dataclass(frozen=True)
class Receipt:
    """What a webhook batch did: the answer's counts and what to run after answering."""

    counts: dict[str, int]
    # Slots the batch's results freed.
    freed: int
    # The batch's completed items were settled, and their statement also claimed
    # the next rows (`next_jobs`, up to one per item): no claim is left to do.
    settled: bool = False
    next_jobs: tuple[Job, ...] = ()
    # Drift canaries' answers (docs/canaries.md): their next rows go out after answering.
    canaries: int = 0


def should_chain(*, more: bool, busy: bool, freed: int = 0, dispatched: bool = False,
                 recovered: int = 0) -> bool:
    """Whether a step fires one more step: the chain's only rule.

    `more`: another row could be claimed right now.  `busy`: the function said
    429/503, which pauses dispatching for everyone.  `freed`: slots the results
    behind this step freed (0 for the process endpoint, the cron and an
    enqueue).  A step that refills the one slot its result freed chains only
    when that did not work out (the dispatch failed) or recovery freed more:
    every other busy slot is refilled by its own result, so chaining there
    would only steal a slot and cost an invocation.
    """
    if busy or not more:
        return False
    if freed == 1:
        return not dispatched or recovered > 0
    return True


async def process_step(rt: Runtime[LoopStore], *, force: bool = False,
                       freed: int = 0) -> StepResult:
    """The process endpoint's step: recover, prune, claim one row, dispatch it, chain.

    In sync mode the claimed job is left in `sync_job` for the caller to run
    after it has answered (`run_sync`): the function may take long to reply.
    """
    step = StepResult()
    await step_parts.tidy(rt, step, force)
    # A kind whose pool is down goes to its fallback's pool before the claim.
    await fallback.refresh(rt, force=force)
    started = rt.tracer.now()
    job = await rt.store.claim(fallback.plan(rt))
    await rt.tracer.claimed(rt.store, (job,) if job else (), started)
    busy = await step_parts.hand_out(rt, step, job)
    fell_back = await step_parts.lane(rt, step, force)
    if should_chain(more=(job is not None and job.more) or fell_back > 0, busy=busy,
                    freed=freed, dispatched=step.dispatched, recovered=step.recovered):
        await step_parts.chain(rt, step)
    return step


async def settled_step(rt: Runtime[LoopStore], receipt: Receipt) -> StepResult:
    """After a webhook batch whose last result's transaction already claimed.

    The claimed job goes out first (the function is idle meanwhile), tidying
    up comes after; slots that recovery frees then are not in the claim's `more`.
    """
    step = StepResult()
    jobs = receipt.next_jobs
    # The settle took its rows for this caller (docs/deploying/index.md): they are ours to send.
    busy = await step_parts.hand_out_all(rt, step, jobs)
    await step_parts.tidy(rt, step, force=False)
    await fallback.refresh(rt)
    fell_back = await step_parts.lane(rt, step, force=False)
    more = any(job.more for job in jobs) or step.recovered > 0 or fell_back > 0
    # With several pools the claim may have filled another pool's slot than the
    # one the result freed: that one is then refilled only by a chain.  Every
    # freed slot refilled counts as the one a single result refills.
    freed = receipt.freed if rt.settings.queue.single else 0
    if freed > 1 and len(jobs) >= freed:
        freed = 1
    if should_chain(more=more, busy=busy, freed=freed, dispatched=step.dispatched,
                    recovered=step.recovered):
        await step_parts.chain(rt, step)
    return step


async def run_sync(rt: Runtime[LoopStore], job: Job) -> None:
    """Sync mode: the function's answer is the result item; apply it like a callback."""
    # A lane step this step deferred runs beside the call, not before it.
    fell_back = (await asyncio.gather(send_sync(rt, job), overnight.run_deferred(rt)))[1]
    # The slot is free again; the next row gets an invocation of its own so no
    # single invocation runs into the platform's time limit.
    more = fell_back > 0 or await rt.store.can_claim(fallback.plan(rt))
    if should_chain(more=more, busy=False):
        logs.event("chain", chained=await dispatch.chain(rt.http, rt.settings))


async def _safe_step(rt: Runtime[LoopStore], *, freed: int = 0) -> None:
    """A whole process step after a response was sent: errors are logged, never raised."""
    await _safely(rt, process_step(rt, freed=freed))


async def _safely(rt: Runtime[LoopStore], running: Coroutine[Any, Any, StepResult], *,
                  wait: bool = True) -> None:
    try:
        step = await running
    except Exception as exc:
        # Whatever went wrong (not only the database), the ticker and the next
        # request must live on: this runs where nobody could catch it.
        logs.event("step_error", code=step_parts.error_code(exc))
        step = StepResult(chained=True)  # nothing to wait out: the error is logged
    await _after(rt, step, wait=wait)


async def _after(rt: Runtime[LoopStore], step: StepResult, *, wait: bool = True) -> None:
    """After a step, once its caller answered: its sync job (errors logged, never raised),
    notifications, a short hold waited out."""
    if step.sync_job is not None:
        try:
            await run_sync(rt, step.sync_job)
        except Exception as exc:
            logs.event("step_error", code=step_parts.error_code(exc),
                       queue_id=step.sync_job.queue_id)
    # Notifications go after the step, never before it: the queue comes first.
    await delivery.deliver_safely(rt)
    if wait:
        await wait_out_hold(rt, step)


async def after_enqueue(rt: Runtime[LoopStore], enqueued: int) -> None:
    """After an enqueue answered: kick the chain inside this invocation, no extra hop."""
    if enqueued:
        await _safe_step(rt)


async def after_results(rt: Runtime[LoopStore], receipt: Receipt) -> None:
    """After the webhook answered: a slot just freed, so run the next step ourselves
    (its claim may already have run with the last result, see Receipt)."""
    if receipt.settled and (receipt.freed or receipt.next_jobs):
        await _safely(rt, settled_step(rt, receipt))
    elif receipt.freed:
        await _safe_step(rt, freed=receipt.freed)
    else:
        # No step to run, but a result may still have ended a row or a run.
        await delivery.deliver_safely(rt)
    if receipt.canaries:
        await canary.send_running(rt)


async def on_process(rt: Runtime[LoopStore], *, force: bool) -> StepResult:
    """The process endpoint and the cron (`force`: always recover and prune): one step now."""
    return await process_step(rt, force=force)


async def on_cron(rt: Runtime[LoopStore]) -> StepResult:
    """The cron's call (GET): noted in the control row, so the doctor can tell a cron
    that stopped calling (docs/deploying/index.md); then a step that always recovers and prunes."""
    await rt.store.cron_called()
    return await on_process(rt, force=True)


async def after_action(rt: Runtime[LoopStore]) -> None:
    """After a manual action answered (retry, resume...): it may have freed work."""
    await _safe_step(rt)


async def after_review(rt: Runtime[LoopStore]) -> None:
    """After a review answered: its run's thresholds may now release held rows."""
    try:
        released = await calibration.release_when_met(rt)
    except Exception as exc:
        logs.event("step_error", code=step_parts.error_code(exc))
        return
    if released:
        await _safe_step(rt)


async def after_cancel(rt: Runtime[LoopStore]) -> None:
    """After a cancel answered: it may have ended a run, whose notification goes out now."""
    await delivery.deliver_safely(rt)


async def after_process(rt: Runtime[LoopStore], step: StepResult) -> None:
    """After the process endpoint (chain, cron) answered: a sync job, notifications, a hold."""
    await _after(rt, step)


async def wait_out_hold(rt: Runtime[LoopStore], step: StepResult) -> None:
    """A step that ended the chain while work is held back only briefly waits that
    out (hold.py) and steps again, once per invocation."""
    if step.claimed is not None or step.chained:
        return
    try:
        wait = await hold.short_wait(rt)
    except Exception as exc:
        logs.event("step_error", code=step_parts.error_code(exc))
        return
    if wait is None:
        return
    await asyncio.sleep(wait + 0.01)
    # Once per invocation: a second wait could outlast the platform's time limit.
    await _safely(rt, process_step(rt), wait=False)


async def after_read(rt: Runtime[LoopStore]) -> None:
    """After a read answered: run a step when rows are due but nothing is in flight.

    For authenticated status reads (after answering), so a queue whose chain
    was lost moves again as soon as anyone looks at it, even without a cron.
    `can_claim` with every pool's cap at 1 means exactly "a row is due, none of
    its pool is in flight, and pause, busy back-off and breaker allow a dispatch".
    """
    try:
        stalled = await rt.store.can_claim(rt.settings.claim_plan.stalled)
    except StoreError:
        return
    if stalled:
        logs.event("kick", reason="status_read")
        await _safe_step(rt)


async def tick_forever(rt: Runtime[LoopStore]) -> None:
    """The in-process safety net: run a step whenever something may be due.

    Sleeps until the next due row, breaker probe or lease expiry (at most
    `tick_seconds`), so delayed retries start on time without a cron.
    """
    s = rt.settings
    while True:
        try:
            wait = await housekeeping.next_due(rt)
        except Exception as exc:
            logs.event("tick_error", code=step_parts.error_code(exc))
            wait = None
        delay = s.tick_seconds if wait is None else min(max(wait, 0.05), s.tick_seconds)
        ticker = rt.own(housekeeping.TickerSleep)
        await ticker.sleep(delay)
        if ticker.until:  # slept its time, not woken by a dispatch to look again
            await _safe_step(rt)
