"""A process step's plumbing: what it did, and the parts loop.py puts together.

Handing claimed jobs out, the overnight lane's turn, tidying on the way and
firing the chain; loop.py alone decides when each runs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiqueue import dispatch, logs
from aiqueue.errors import StoreError
from aiqueue.models import Job
from aiqueue.ports import LoopStore
from aiqueue.queue import housekeeping, overnight
from aiqueue.queue.handout import dispatch_async
from aiqueue.runtime import Runtime


@dataclass
class StepResult:
    """What one process step did (web/api.py answers it as wire's ProcessStep)."""

    claimed: Job | None = None
    dispatched: bool = False
    recovered: int = 0
    pruned: int = 0
    chained: bool = False
    sync_job: Job | None = None


async def hand_out(rt: Runtime[LoopStore], step: StepResult, job: Job | None) -> bool:
    """Dispatch a claimed job (sync mode: leave it for run_sync); True if the function is busy."""
    step.claimed = job
    if job is None:
        return False
    logs.event("claim", queue_id=job.queue_id, attempt=job.attempt, kind=job.kind,
               pool=job.pool)
    if rt.settings.function_mode == "sync":
        step.dispatched = True
        step.sync_job = job
        return False
    outcome = await dispatch_async(rt, job)
    step.dispatched = isinstance(outcome, dispatch.Accepted)
    rt.own(housekeeping.TickerSleep).dispatched()
    return isinstance(outcome, dispatch.Busy)


async def hand_out_all(rt: Runtime[LoopStore], step: StepResult,
                       jobs: tuple[Job, ...]) -> bool:
    """Dispatch a settle's claimed jobs at once; `step` dispatched means all of them."""
    if len(jobs) <= 1:
        return await hand_out(rt, step, jobs[0] if jobs else None)
    steps = [StepResult() for _ in jobs]
    busy = await asyncio.gather(*(hand_out(rt, one, job) for one, job in zip(steps, jobs,
                                                                              strict=True)))
    step.claimed, step.dispatched = jobs[-1], all(one.dispatched for one in steps)
    return any(busy)


async def lane(rt: Runtime[LoopStore], step: StepResult, force: bool) -> int:
    """The overnight lane's step, after the live dispatch (a sync job: beside its call);
    the rows it sent live, which a chain then claims."""
    if step.sync_job is not None:
        overnight.defer(rt, force)
        return 0
    return await overnight.run_if_due(rt, force)


async def chain(rt: Runtime[LoopStore], step: StepResult) -> None:
    """Fire one more step in an invocation of its own."""
    step.chained = await dispatch.chain(rt.http, rt.settings)
    logs.event("chain", chained=step.chained)


async def tidy(rt: Runtime[LoopStore], step: StepResult, force: bool) -> None:
    """Tidy on the step's way (housekeeping.py): at most once a second, unless forced."""
    tidied = await housekeeping.tidy(rt, force)
    step.recovered, step.pruned = tidied.recovered, tidied.pruned


def error_code(exc: Exception) -> str:
    """A log-safe code for an error: ours carry one; others only their type's name."""
    return exc.code if isinstance(exc, StoreError) else type(exc).__name__
