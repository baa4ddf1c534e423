"""Ordered fallback between kinds: when a kind's pool is down, another's.

A kind may name `fallback = "<kind>"` (another kind, in another pool) and
`fallback_after_seconds` (default 120) in aiqueue.toml.  While its pool has its
circuit open, or has refused every call for that long, the kind is *away*:
its pending live rows move to the fallback kind's pool
(db/sql/functions/65_fallback.sql) and the claim's plan lists it there,
sharing the fallback's cap, so they are dispatched to the fallback's function
within the fallback pool's limits, turns and caps.  Each row keeps its kind;
the attempt records the kind that ran it and the result the model that marked
it.  To learn whether the pool is back, `fallback_after_seconds` after its
last hold ended (or when its breaker's cool-down does) the kind comes home:
its rows move back and the next dispatch tries its own function; a result
ends the run of refusals, a refusal sends the rows away again.  A row on a
fallback never moves on to the fallback's own fallback.

Each instance looks at most every EVERY seconds (the chain's steps and the
cron move the rows); the settle's claim uses the plan of the last look.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from aiqueue import logs
from aiqueue.errors import StoreError
from aiqueue.models import Job
from aiqueue.ports import FallbackStore
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from aiqueue.settings.plan import ClaimPlan

EVERY = 1.0


@dataclass
class FallbackState:
    """This instance's last look (kept in Runtime.own)."""

    due: float = 0.0
    away: frozenset[str] = frozenset()


def down(state: tuple[bool, float | None, float | None] | None, after: float, *,
         probing: bool = True) -> bool:
    """A pool is down for a kind: its circuit is open, or it has refused every call for
    `after` seconds.  With `probing`, a pool whose last hold ended `after` seconds ago is
    tried again (its kind comes home for a call)."""
    if state is None:
        return False
    circuit_open, hold_ended, refusing = state
    if circuit_open:
        return True
    if refusing is None or refusing < after:
        return False
    return not probing or hold_ended is None or hold_ended < after


async def on_fallback(rt: Runtime[FallbackStore]) -> dict[str, str]:
    """{kind: its fallback} for the kinds whose pool is down and has taken no call since,
    as the pages and /metrics show them (a look, nothing moves)."""
    kinds = rt.settings.queue.fallbacks
    if not kinds:
        return {}
    pools = await rt.store.pools_down(sorted({k.pool for k in kinds}))
    return {k.name: k.fallback for k in kinds if k.fallback is not None
            and down(pools.get(k.pool), k.fallback_after_seconds, probing=False)}


async def refresh(rt: Runtime[FallbackStore], *, force: bool = False) -> frozenset[str]:
    """Look at the pools of the kinds with a fallback and move their rows; the kinds away."""
    q = rt.settings.queue
    kinds = q.fallbacks
    if not kinds:
        return frozenset()
    state = rt.own(FallbackState)
    now = time.monotonic()
    if not force and now < state.due:
        return state.away
    state.due = now + EVERY
    try:
        pools = await rt.store.pools_down(sorted({k.pool for k in kinds}))
        away = frozenset(k.name for k in kinds
                         if down(pools.get(k.pool), k.fallback_after_seconds))
        moves = [{"kind": k.name, "home": k.pool, "to": q.pool_of(k.fallback or k.name).name,
                  "as": k.fallback, "away": k.name in away} for k in kinds]
        moved = await rt.store.fallback_move(json.dumps(moves))
    except StoreError as exc:
        # The last look stands; the next step looks again.
        logs.event("fallback_error", code=exc.code)
        return state.away
    for name in away ^ state.away:
        logs.event("fallback", kind=name, status="away" if name in away else "home")
    if moved:
        logs.event("fallback_moved", count=moved)
    state.away = away
    return away


def away(rt: Runtime[object]) -> frozenset[str]:
    """The kinds running on their fallback, as this instance last looked."""
    return rt.own(FallbackState).away if rt.settings.queue.fallbacks else frozenset()


def plan(rt: Runtime[object]) -> ClaimPlan:
    """The claim's plan now: the kinds away listed in their fallbacks' pools."""
    return rt.settings.claim_plan.with_away(rt.settings.queue, away(rt))


def run_kind(settings: Settings, job: Job) -> str:
    """The kind whose function runs `job`: its own, or its fallback while it sits in the
    fallback's pool."""
    kind = settings.queue.kinds.get(job.kind)
    if kind is not None and kind.fallback is not None and job.pool != kind.pool:
        return kind.fallback
    return job.kind
