"""Housekeeping around the loop's steps: recovery, pruning, retention, expiry, alerts.

The loop decides when a step runs; this module is what a step tidies on
its way, and when the next thing may come due (the in-process ticker).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from aiqueue import logs
from aiqueue.notify import alerts, delivery
from aiqueue.ports import LoopStore
from aiqueue.queue import calibration, canary, overnight, recovery, schedule
from aiqueue.runtime import Runtime

HOUSEKEEPING_EVERY = 1.0


@dataclass
class Housekeeping:
    """This instance's housekeeping timer (kept in Runtime.own)."""

    # monotonic time when this instance next runs recovery and pruning
    due: float = 0.0


@dataclass
class TickerSleep:
    """When the in-process ticker wakes next (kept in Runtime.own), and how to wake it sooner.

    A dispatch sent while the ticker sleeps long (nothing was in flight) wakes
    it to look again: that dispatch's early look (docs/deploying/index.md, at least 10 s
    after it) may come before the sleep would end.
    """

    until: float = 0.0  # monotonic
    woken: asyncio.Event = field(default_factory=asyncio.Event)

    async def sleep(self, seconds: float) -> None:
        self.woken.clear()
        self.until = time.monotonic() + seconds
        try:
            await asyncio.wait_for(self.woken.wait(), seconds)
        except TimeoutError:
            pass

    def dispatched(self) -> None:
        """A dispatch went out: one compare, and the ticker woken only if it would oversleep
        the dispatch's first look."""
        if self.until - time.monotonic() > recovery.P95_FLOOR_SECONDS:
            self.until = 0.0
            self.woken.set()


@dataclass(frozen=True)
class Tidied:
    """What one housekeeping round did."""

    recovered: int = 0
    pruned: int = 0


async def tidy(rt: Runtime[LoopStore], force: bool) -> Tidied:
    """Recover stuck rows and prune old ones: at most once a second, unless forced."""
    # Both look for rows that are minutes overdue: once a second per instance
    # is plenty (the cron's `force` always runs them), so the hot path rarely pays.
    now = time.monotonic()
    timer = rt.own(Housekeeping)
    if not force and now < timer.due:
        return Tidied()
    s = rt.settings
    timer.due = now + HOUSEKEEPING_EVERY
    recovered = await recovery.recover(rt)
    pruned = await rt.store.prune(s.prune_after_days * 86400)
    # Retention (docs/operating/data-protection.md; what is kept: records/retention.py): ended rows,
    # results and attempt history past their periods, in bounded batches.
    kept = await rt.store.retain(s.retain_ended_days * 86400, s.retain_history_days * 86400,
                                 completed_seconds=s.prune_after_days * 86400)
    pruned += kept.ended
    # Rows past their expires_at end `expired` (the claim already skips them).
    await schedule.expire(rt)
    if recovered or pruned:
        logs.event("housekeeping", recovered=recovered, pruned=pruned)
    await alerts.evaluate(rt, force=force)
    # A calibration_ready two ends at once left unwritten; thresholds met (docs/agreement.md).
    await calibration.release_when_met(rt)
    # Drift canaries: their schedule, a model change, their rows (docs/canaries.md).
    await canary.tick(rt, force=force)
    return Tidied(recovered, pruned)


async def next_due(rt: Runtime[LoopStore]) -> float | None:
    """Seconds until something may be due: a row, a breaker probe, a lease's end, a
    notification's retry, an expiry (docs/operating/alerts.md), a look at a batch or a canary's look
    asked for too soon; None when nothing is."""
    wait = await recovery.next_wakeup(rt)
    wait = _sooner(wait, await delivery.next_due(rt))
    wait = _sooner(wait, overnight.next_look(rt))
    wait = _sooner(wait, canary.next_look(rt))
    return _sooner(wait, await schedule.next_expiry(rt))


def _sooner(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)
