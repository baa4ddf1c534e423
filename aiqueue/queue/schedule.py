"""Not before and expiry: when scheduled rows come due, and ending stale ones.

An enqueue's `not_before`/`delay_seconds` and `expires_at`/`expire_after_seconds`
are read in aiqueue/wire/enqueue.py (parse_times) and stored with the rows by the
enqueue statement.  A scheduled row's run_after is its not_before, so the claim
leaves it alone until then, and the ticker's next_wakeup (every pending row's
run_after) wakes for it.  The claim never hands out a row past its expires_at;
the sweep here ends such rows `expired` (db/sql/schedule.sql).
"""

from __future__ import annotations

from aiqueue import logs
from aiqueue.ports import ScheduleStore
from aiqueue.runtime import Runtime


async def expire(rt: Runtime[ScheduleStore]) -> int:
    """End pending rows whose expires_at has passed (one bounded batch); how many."""
    n = await rt.store.expire_rows()
    if n:
        logs.event("expired", count=n)
    return n


async def next_due_soon(rt: Runtime[ScheduleStore]) -> float | None:
    """Seconds until the next scheduled row comes due (None: none is scheduled)."""
    return await rt.store.next_scheduled()


async def next_expiry(rt: Runtime[ScheduleStore]) -> float | None:
    """Seconds until a pending row expires, for the ticker's sleep (None: none will)."""
    return await rt.store.next_expiry()
