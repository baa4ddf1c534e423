"""Drift canaries (docs/canaries.md): when a kind's canary runs, and what its figures mean.

A canary re-marks up to `rows` teacher-reviewed results of a kind under their
own payloads (the set and the skip for `max_share`: 89_canary.sql; sending
and answers: canary_send.py).  It runs on its schedule (`every_seconds`),
when a result of the kind reports a model or function version unlike the
last passing canary's (`model_change`), and on demand (`manual`).  Its
`exact` and `qwk` against the teachers' scores (models/agreement.py) are
held to the last passing (or accepted) canary's: a drop of more than
`max_drop` in either opens the kind's `drift` alert, and until it resolves
every new enqueue of the kind gets a calibration gate of 5 rows.

The housekeeping that already runs (queue/housekeeping.py) calls `tick`; a
deployment without canaries pays nothing for it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

from aiqueue import logs
from aiqueue.errors import Conflict, NotFound, StoreError
from aiqueue.models.agreement import Agreement, Review, agreement
from aiqueue.models.calibration import GateAsked
from aiqueue.models.canary import CanaryMarks, CanaryRun, Trigger
from aiqueue.ports import CanaryStore
from aiqueue.queue import canary_batch, canary_send
from aiqueue.runtime import Runtime
from aiqueue.settings.canary import Canary
from aiqueue.settings.kinds import BATCH_SHARE, Kind

# At most one look this often per instance, unless forced (the cron).
EVERY = 5.0
# The calibration gate a drifting kind's enqueues get unless they name their own.
DRIFT_GATE_ROWS = 5
# How far back a model-change look reads results (it runs every few seconds).
LOOK_BACK = timedelta(hours=1)
# A skipped canary's schedule comes round again within this many seconds.
RETRY_SKIPPED = 3600.0
# Two figures closer than this are equal.
EPSILON = 1e-9


@dataclass
class CanaryTimer:
    """This instance's canary timer (kept in Runtime.own)."""

    due: float = 0.0
    # A look was asked for before `due` (a result came): the ticker wakes for it then.
    asked: bool = False


@dataclass(frozen=True)
class Verdict:
    """A canary held to its yardstick: passed, and the larger drop (0 without one)."""

    passed: bool | None
    drop: float


def verdict(figures: Agreement, yardstick: CanaryRun | None, max_drop: float) -> Verdict:
    """Pass unless exact or qwk fell more than `max_drop` below the yardstick's; a canary
    with no answered row decides nothing (None), and the first one is the yardstick."""
    if figures.exact is None:
        return Verdict(None, 0.0)
    if yardstick is None:
        return Verdict(True, 0.0)
    drops = [before - now for before, now in ((yardstick.exact, figures.exact),
                                              (yardstick.qwk, figures.qwk))
             if before is not None and now is not None]
    drop = max(drops, default=0.0)
    return Verdict(drop <= max_drop + EPSILON, max(drop, 0.0))


def figures_of(rows: Sequence[CanaryMarks]) -> Agreement:
    """The canary's agreement with the teachers: each row a pair (canary's, teacher's)."""
    return agreement(Review(r.id, "accepted", r.marks, r.teacher) for r in rows)


def _most(values: Sequence[str | None]) -> str | None:
    found = Counter(v for v in values if v)
    return found.most_common(1)[0][0] if found else None


def declared(rt: Runtime[CanaryStore], name: str) -> tuple[Kind, Canary]:
    """The kind and its canary; NotFound when the kind declares none."""
    kind = rt.settings.queue.kinds.get(name)
    if kind is None or kind.canary is None:
        raise NotFound(f"kind {name!r} declares no canary ([kinds.{name}.canary] in "
                       "aiqueue.toml)")
    return kind, kind.canary


async def start(rt: Runtime[CanaryStore], name: str, trigger: Trigger,
                seen: tuple[str | None, str | None] = (None, None)) -> CanaryRun | None:
    """Start the kind's canary (None: one is running); a skipped run says why."""
    kind, canary = declared(rt, name)
    pool = rt.settings.queue.pools[kind.pool]
    lane = kind.canary_lane(pool)
    run = await rt.store.canary_start(name, pool.name, trigger, lane, canary.rows, *seen,
                                      canary.max_share,
                                      BATCH_SHARE if lane == "batch" else 1.0)
    if run is not None:
        logs.event("canary", kind=name, trigger=trigger, run_id=run.run_id, state=run.state,
                   rows=run.rows, reason=run.skipped)
    return run


async def finish(rt: Runtime[CanaryStore], run_id: UUID, name: str) -> CanaryRun | None:
    """Judge a run whose rows have all ended: its figures, verdict and drift alert."""
    kind, canary = declared(rt, name)
    rows = await rt.store.canary_rows(run_id)
    figures = figures_of(rows)
    yardstick = await rt.store.canary_yardstick(name)
    judged = verdict(figures, yardstick, canary.max_drop)
    run = await rt.store.canary_finish(
        run_id, figures.exact, figures.qwk, _most([r.model for r in rows]),
        _most([r.function_version for r in rows]), yardstick, judged.passed,
        round(judged.drop, 9), canary.max_drop)
    if run is not None:
        logs.event("canary_finished", kind=name, run_id=run_id, passed=run.passed,
                   answered=run.answered, exact=run.exact, qwk=run.qwk,
                   drift=judged.passed is False)
    return run


async def tick(rt: Runtime[CanaryStore], *, force: bool = False) -> None:
    """One look: end stuck rows, judge finished runs, send rows, start the runs due."""
    kinds = [k.name for k in rt.settings.queue.kinds.values() if k.canary is not None]
    timer = rt.own(CanaryTimer)
    now = time.monotonic()
    if not kinds:
        return
    if not force and now < timer.due:
        timer.asked = True
        return
    timer.due, timer.asked = now + EVERY, False
    try:
        await _look(rt, kinds)
    except StoreError as exc:
        # Canaries never hold the queue back; the next look tries again.
        logs.event("canary_error", code=exc.code)


def next_look(rt: Runtime[CanaryStore]) -> float | None:
    """Seconds until a look that was asked for too soon may run (None: none waits), so a
    model change seen by the last result of a run starts its canary without a cron."""
    timer = rt.own(CanaryTimer)
    return max(timer.due - time.monotonic(), 0.0) if timer.asked else None


async def _look(rt: Runtime[CanaryStore], kinds: list[str]) -> None:
    await rt.store.canary_timeouts(rt.settings.stuck_after_seconds)
    await settle_running(rt)
    latest = {r.kind: r for r in await rt.store.canary_latest()}
    for name in kinds:
        last = latest.get(name)
        if last is None or last.state != "running":
            await _maybe_start(rt, name, last)
        touched = await canary_send.send(rt, name)
        if touched:
            await settle_running(rt)
    # The batch lane's canaries: pack, look, clean up (only where a pool has a batch API).
    if rt.settings.queue.batch_pools and await canary_batch.step(rt):
        await settle_running(rt)


async def settle_running(rt: Runtime[CanaryStore]) -> None:
    """Judge every running canary whose rows have all ended."""
    for run_id, name, _lane, still_open in await rt.store.canary_running():
        if still_open == 0 and name in rt.settings.queue.kinds:
            await finish(rt, run_id, name)


async def _maybe_start(rt: Runtime[CanaryStore], name: str, last: CanaryRun | None) -> None:
    """A model_change when a result reports a pair unlike the yardstick's (and unlike the
    last canary's: one look per pair), else the schedule's when it is due."""
    canary = rt.settings.queue.kinds[name].canary
    assert canary is not None
    now = datetime.now(UTC)
    yardstick = await rt.store.canary_yardstick(name)
    if yardstick is not None and last is not None:
        since = max(last.started_at, now - LOOK_BACK)
        seen = await rt.store.canary_model_seen(name, since, yardstick.pair, last.pair)
        if seen is not None:
            await start(rt, name, "model_change", seen)
            return
    # A skipped canary (nothing reviewed yet, or over max_share) is tried again within
    # the hour: reviews and spend change sooner than a daily schedule comes round.
    every = canary.every_seconds if last is None or last.state != "skipped" \
        else min(canary.every_seconds, RETRY_SKIPPED)
    if last is None or (now - last.started_at).total_seconds() >= every:
        await start(rt, name, "schedule")


async def on_answer(rt: Runtime[CanaryStore], item: canary_send.CanaryAnswer) -> bool:
    """A canary answer from the webhook: recorded once; its run judged when it was the last."""
    run_id = await canary_send.record(rt, item)
    if run_id is not None:
        await settle_running(rt)
    return run_id is not None or item.status == "progress"


async def run_now(rt: Runtime[CanaryStore], name: str) -> CanaryRun:
    """POST /api/marking/canary/{kind}/run: start one now (Conflict: one is running)."""
    run = await start(rt, name, "manual")
    if run is None:
        raise Conflict(f"a canary of kind {name!r} is running; wait for it to finish")
    return run


async def send_running(rt: Runtime[CanaryStore]) -> None:
    """After canary answers (a slot of theirs freed): each running live canary's next rows."""
    try:
        for _run_id, name, lane, still_open in await rt.store.canary_running():
            if lane == "live" and still_open and name in rt.settings.queue.kinds:
                if await canary_send.send(rt, name):
                    await settle_running(rt)
    except StoreError as exc:
        logs.event("canary_error", code=exc.code)


async def send_now(rt: Runtime[CanaryStore], name: str) -> None:
    """Send a kind's canary rows now (after a manual start's answer), judging what ended."""
    try:
        if await canary_send.send(rt, name):
            await settle_running(rt)
        if rt.settings.queue.batch_pools and await canary_batch.step(rt):
            await settle_running(rt)
    except StoreError as exc:
        logs.event("canary_error", code=exc.code)


async def accept(rt: Runtime[CanaryStore], name: str, actor: str | None) -> CanaryRun:
    """POST /api/marking/canary/{kind}/accept: the drifting canary becomes the yardstick."""
    declared(rt, name)
    run = await rt.store.canary_accept(name, actor)
    if run is None:
        raise Conflict(f"kind {name!r} has no open drift to accept")
    logs.event("canary_accepted", kind=name, run_id=run.run_id)
    return run


async def drift_gate(rt: Runtime[CanaryStore], kind: Kind) -> GateAsked | None:
    """The calibration gate an enqueue of a drifting kind gets (None: no drift open)."""
    if kind.canary is None or not await rt.store.canary_drift_open(kind.name):
        return None
    return GateAsked(rows=DRIFT_GATE_ROWS)
