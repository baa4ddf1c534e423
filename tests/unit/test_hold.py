"""Housekeeping's timer and the short hold a step waits out (queue/housekeeping.py, hold.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from aiqueue.queue import hold, housekeeping
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from aiqueue.tokens import Tokens
from tests.unit.fakes import FakeStore

SECRET = "unit-secret-0123456789abcdef"


def runtime(store: FakeStore, **kw: Any) -> Runtime[FakeStore]:
    s = Settings(queue_secrets=(SECRET,)).with_overrides(**kw)
    return Runtime(settings=s, store=store, http=httpx.AsyncClient(), tokens=Tokens(SECRET))


async def test_housekeeping_runs_at_most_once_a_second_unless_forced() -> None:
    store = FakeStore(recovered=2)
    rt = runtime(store)
    assert await housekeeping.tidy(rt, force=False) == housekeeping.Tidied(recovered=2)
    assert {"recover_stuck", "prune", "retain", "expire_rows"} <= set(store.names())
    store.calls.clear()
    assert await housekeeping.tidy(rt, force=False) == housekeeping.Tidied()
    assert store.calls == []
    # The cron's step always tidies.
    assert await housekeeping.tidy(rt, force=True) == housekeeping.Tidied(recovered=2)


async def test_a_row_due_soon_is_waited_for_by_one_step_of_the_instance() -> None:
    store = FakeStore(scheduled_in=3.0)
    rt = runtime(store)
    assert await hold.short_wait(rt) == 3.0
    # Another step of the same instance would only find the gate closed again.
    assert await hold.short_wait(rt) is None


async def test_a_long_wait_is_left_to_the_cron() -> None:
    rt = runtime(FakeStore(scheduled_in=hold.HOLD_WAIT_MAX_SECONDS + 1))
    assert await hold.short_wait(rt) is None
    assert await hold.short_wait(runtime(FakeStore())) is None  # nothing scheduled


async def test_a_held_pool_waits_for_the_step_to_have_work() -> None:
    store = FakeStore(hold_until=datetime.now(UTC) + timedelta(seconds=2), wakeup_in=2.0,
                      scheduled_in=None)
    rt = runtime(store)
    assert await hold.held_back(rt)
    assert await hold.short_wait(rt) == 2.0
    assert "next_wakeup" in store.names() and "next_scheduled" not in store.names()
