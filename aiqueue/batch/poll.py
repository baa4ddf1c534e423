"""Looking at a pool's batches: apply what ended, fall back before a deadline, delete.

A batch is looked at every `poll_seconds`, and never later than its fallback
point: when the live time of its unresolved rows (behind the live rows
already waiting in the pool, at its learned limit L) plus the margin would
pass the nearest deadline, it is cancelled and its rows go live. A batch the
provider no longer knows, or whose results can't be read by then, falls back
the same way. Once a batch's results are applied, or it failed, expired or
was cancelled, everything the provider keeps of it is deleted; a deletion
refused (still cancelling) is asked again on later looks until it is done.
"""

from __future__ import annotations

import math
import time

from aiqueue.batch.apply import apply
from aiqueue.batch.function import FunctionModeError
from aiqueue.batch.pack import LaneConfig, Packer, StepReport, live_estimate, pack
from aiqueue.batch.provider import Handle, Polled, ProviderError
from aiqueue.batch.reconcile import reconcile
from aiqueue.models.batch import LaneBatch

# The soonest a batch is looked at again (a fallback point just past is acted on now).
MIN_LOOK = 1.0


async def poll(packer: Packer, report: StepReport, now: float | None = None) -> None:
    """Look once at each of the pool's batches that is due, while the step has time."""
    cfg = packer.config
    for batch in await packer.store.batches_due(cfg.pool, cfg.poll_seconds):
        if packer.left() <= 0:
            # Taken for poll_seconds by batches_due: hand it back for the next step.
            await packer.store.batch_mark(batch.id, batch.state, batch.files, 0)
            continue
        clock = time.time() if now is None else now
        try:
            await _look(packer, batch, report, clock)
        except ProviderError as exc:
            report.errors.append(exc.code)
            await _unreadable(packer, batch, report, clock, exc.code)
        except FunctionModeError as exc:
            # Looked at again once its hold passes; nothing was half-applied.
            report.errors.append(exc.code)


async def _look(packer: Packer, batch: LaneBatch, report: StepReport, now: float) -> None:
    assert batch.provider_batch_id is not None  # set with 'submitted'
    handle = Handle(batch.provider_batch_id, batch.files)
    if batch.state == "ended":
        await _delete(packer, batch, handle, report)  # applied; deletion was refused
        return
    polled = await packer.provider.poll(handle)
    if polled.state == "running":
        await _running(packer, batch, polled, report, now)
        return
    applied = await apply(packer, batch, polled, report)
    if applied == "more":  # the step's time ran out: the rest on the next step
        await packer.store.batch_mark(batch.id, batch.state, polled.handle.files, 0)
        return
    if applied == "not_ours" or batch.state == "cancelling":
        # What the cancel stopped goes live without using an attempt.
        report.fell_back += await packer.store.batch_fallback(batch.id)
    if applied == "not_ours":
        # Adopted by its time and size (Anthropic), but no line is ours: not deleted.
        report.errors.append("batch_not_ours")
        await packer.store.batch_mark(batch.id, "done", (), 0)
        return
    await packer.store.batch_mark(batch.id, "ended", polled.handle.files, 0)
    await _delete(packer, batch, polled.handle, report)


async def _running(packer: Packer, batch: LaneBatch, polled: Polled, report: StepReport,
                   now: float) -> None:
    """A batch still running: cancel it at its fallback point, go live once the cancel
    outlasts the margin, and look again no later than the next of those."""
    cfg, state = packer.config, batch.state
    margin = cfg.margin_seconds if state == "submitted" else 0.0
    until = await fallback_in(packer, batch, now, margin)
    if until <= 0 and state == "submitted":
        # Cancel first and keep the rows: lines the provider finishes while it
        # cancels are paid already, so they are applied, not marked again.
        await packer.provider.cancel(polled.handle)
        state = "cancelling"
        until = await fallback_in(packer, batch, now, 0.0)
    if until <= 0 and state == "cancelling":
        # The cancel takes longer than the margin allowed: go live now; a
        # line that is answered after all is applied if it comes first.
        report.fell_back += await packer.store.batch_fallback(batch.id)
        until = math.inf
    await packer.store.batch_mark(batch.id, state, polled.handle.files, _next_look(cfg, until))


def _next_look(cfg: LaneConfig, until: float) -> float:
    """Seconds to the next look: every poll, and no later than the fallback point."""
    return max(min(MIN_LOOK, cfg.poll_seconds), min(cfg.poll_seconds, until))


async def fallback_in(packer: Packer, batch: LaneBatch, now: float, margin: float) -> float:
    """Seconds until the batch must fall back (≤ 0: now): its nearest deadline less the
    live time of its unresolved rows behind the pool's live backlog, and `margin`; and
    never past the provider's window, after which a batch only expires."""
    cfg, store = packer.config, packer.store
    rows, deadline = await store.batch_pending(batch.id)
    window = batch.created_at + cfg.window_seconds - now
    if not rows or deadline is None:
        return window if rows else math.inf
    per_row = await store.batch_live_seconds() or cfg.default_live_seconds
    backlog, learned = await store.batch_backlog(cfg.pool)
    slots = cfg.slots if learned is None else min(learned, cfg.slots or learned)
    needed = live_estimate(rows + backlog, per_row, slots) + margin
    return min(deadline.timestamp() - needed - now, window)


async def _unreadable(packer: Packer, batch: LaneBatch, report: StepReport, now: float,
                      code: str) -> None:
    """A look that failed: a batch the provider no longer knows falls back now; one whose
    state or results can't be read falls back at its fallback point, like a stalled one."""
    if batch.state == "ended":
        await packer.store.batch_mark(batch.id, "ended", batch.files, packer.config.poll_seconds)
        return  # its rows are applied; the deletion is asked again
    gone = code == "provider_http_404"
    margin = packer.config.margin_seconds if batch.state == "submitted" else 0.0
    until = 0.0 if gone else await fallback_in(packer, batch, now, margin)
    if until > 0:
        await packer.store.batch_mark(batch.id, batch.state, batch.files,
                                      _next_look(packer.config, until))
        return
    report.fell_back += await packer.store.batch_fallback(batch.id)
    # Whatever the provider still keeps of it is deleted on the next looks.
    await packer.store.batch_mark(batch.id, "ended", batch.files,
                                  0 if gone else _next_look(packer.config, 0))
    if not gone:
        await _cancel_quietly(packer, batch)


async def _cancel_quietly(packer: Packer, batch: LaneBatch) -> None:
    assert batch.provider_batch_id is not None
    try:
        await packer.provider.cancel(Handle(batch.provider_batch_id, batch.files))
    except ProviderError:
        pass  # its deletion, asked on each look, waits until it has ended


async def _delete(packer: Packer, batch: LaneBatch, handle: Handle, report: StepReport) -> None:
    """Delete what the provider keeps; while it can't yet, look again next step."""
    if await packer.provider.delete(handle):
        await packer.store.batch_mark(batch.id, "done", (), 0)
        report.deleted += 1
    else:
        await packer.store.batch_mark(batch.id, "ended", handle.files, packer.config.poll_seconds)


async def step(packer: Packer, now: float | None = None) -> StepReport:
    """One lane step, as the cron and the chain run it: reconcile, poll, pack (each only
    while the step's lane time lasts)."""
    report = StepReport()
    await reconcile(packer, report)
    await poll(packer, report, now)
    if packer.config.packs:
        await pack(packer, report)
    return report
