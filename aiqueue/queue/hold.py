"""A short hold that a step waits out inside its own invocation (loop.wait_out_hold).

On a serverless deployment nothing else would wake the queue before the
cron, a minute later, and the model would idle meanwhile.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiqueue.ports import LoopStore
from aiqueue.queue import recovery, schedule
from aiqueue.runtime import Runtime

# The longest hold a step waits out inside its own invocation: well within a
# serverless function's time limit (vercel.json gives each 60 s).
HOLD_WAIT_MAX_SECONDS = 20.0


@dataclass
class HoldWaiter:
    """This instance's one waiter on a short hold (kept in Runtime.own)."""

    # event-loop time until which a step waits out a short hold (wait_out_hold)
    until: float = 0.0


async def short_wait(rt: Runtime[LoopStore]) -> float | None:
    """Seconds to wait before stepping again, when work is held back only briefly (a
    refusal's retry_after, a budget window refilling, a row scheduled to be due soon);
    None when the hold is long or another step of this instance already waits.

    One waiter per instance: the others' steps would only find the gate closed again.
    """
    if await held_back(rt):
        wait = await recovery.next_wakeup(rt)
    else:
        # Not held back by the model's limits; only rows scheduled to be
        # due soon (docs/operating/alerts.md) are waited for, the rest is the cron's.
        wait = await schedule.next_due_soon(rt)
    now = asyncio.get_running_loop().time()
    waiter = rt.own(HoldWaiter)
    if wait is None or wait > HOLD_WAIT_MAX_SECONDS or waiter.until > now:
        return None
    waiter.until = now + max(wait, 0.0)
    return max(wait, 0.0)


async def held_back(rt: Runtime[LoopStore]) -> bool:
    """Whether some pool is held by a refusal, declares a budget (docs/concepts.md) or has
    a spend cap, whose paused rows come due when its window rolls over (docs/concepts.md)."""
    s = rt.settings
    if s.money.capped:
        return True
    for pool in s.queue.pools.values():
        if pool.budget_declared:
            return True
        flow = await rt.store.flow_state(pool.max_in_flight, s.budget_window_seconds, pool.name)
        if flow.hold_until is not None:
            return True
    return False
