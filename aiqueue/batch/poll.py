"""Looking at a pool's batches: apply what ended, fall back before a deadline, delete.

Every line's answer goes through the function's `parse` and the webhook's
apply path (`Settle`), so a result is applied at most once whichever way it
came: a row that fell back to live and whose batch answer arrives too keeps
the first. A line that errored, expired or was never run uses an attempt and
waits for the next batch (or goes live once its live time or the provider's
window has come). Once a batch's results are applied, or it failed, expired or
was cancelled, everything the provider keeps of it is deleted.
"""

from __future__ import annotations

import time
from typing import Any

from aiqueue.batch.function import FunctionModeError
from aiqueue.batch.pack import Packer, StepReport, by_kind, live_estimate, pack, reconcile
from aiqueue.batch.provider import Handle, Outcome, Polled, ProviderError
from aiqueue.models.batch import BatchRow, LaneBatch, LineFailure


async def poll(packer: Packer, report: StepReport, now: float | None = None) -> None:
    """Look once at each of the pool's batches that is due."""
    cfg = packer.config
    for batch in await packer.store.batches_due(cfg.pool, cfg.poll_seconds):
        try:
            await _look(packer, batch, report, time.time() if now is None else now)
        except (ProviderError, FunctionModeError) as exc:
            # Looked at again once its hold passes; nothing was half-applied.
            report.errors.append(exc.code)


async def _look(packer: Packer, batch: LaneBatch, report: StepReport, now: float) -> None:
    cfg = packer.config
    assert batch.provider_batch_id is not None  # set with 'submitted'
    handle = Handle(batch.provider_batch_id, batch.files)
    if batch.state == "ended":
        await _delete(packer, batch, handle, report)  # applied; deletion was refused
        return
    polled = await packer.provider.poll(handle)
    if polled.state == "running":
        state = batch.state
        if state == "submitted" and await _must_fall_back(packer, batch, now, cfg.margin_seconds):
            # Cancel first and keep the rows: lines the provider finishes while it
            # cancels are paid already, so they are applied, not marked again.
            await packer.provider.cancel(polled.handle)
            state = "cancelling"
        elif state == "cancelling" and await _must_fall_back(packer, batch, now, 0.0):
            # The cancel takes longer than the margin allowed: go live now; a
            # line that is answered after all is applied if it comes first.
            report.fell_back += await packer.store.batch_fallback(batch.id)
        await packer.store.batch_mark(batch.id, state, polled.handle.files, cfg.poll_seconds)
        return
    await _apply(packer, batch, polled, report)
    if batch.state == "cancelling":
        # What the cancel stopped goes live without using an attempt.
        report.fell_back += await packer.store.batch_fallback(batch.id)
    await packer.store.batch_mark(batch.id, "ended", polled.handle.files, 0)
    await _delete(packer, batch, polled.handle, report)


async def _must_fall_back(packer: Packer, batch: LaneBatch, now: float, margin: float) -> bool:
    """The deadline is nearer than the live time of the unresolved rows plus `margin`."""
    cfg = packer.config
    rows = await packer.store.batch_rows(batch.id)
    deadlines = [r.deadline.timestamp() for r in rows if r.deadline is not None]
    if not deadlines:
        return False
    per_row = await packer.store.batch_live_seconds() or cfg.default_live_seconds
    needed = live_estimate(len(rows), per_row, cfg.slots) + margin
    # Past the provider's window a batch only expires: go live rather than wait for it.
    late = now >= batch.created_at + cfg.window_seconds
    return late or now + needed >= min(deadlines)


async def _apply(packer: Packer, batch: LaneBatch, polled: Polled, report: StepReport) -> None:
    """Apply an ended (or failed) batch's lines; lines without an answer fail.

    Lines our own cancel stopped are not failures: the caller sends them live.
    """
    cancelled = batch.state == "cancelling"
    lines = {r.custom_id: r for r in await packer.store.batch_lines(batch.id)}
    outcomes = await packer.provider.results(polled) if polled.state == "ended" else []
    answered: list[tuple[BatchRow, Outcome]] = []
    failures: list[LineFailure] = []
    seen: set[str] = set()
    for outcome in outcomes:
        row = lines.get(outcome.custom_id)
        if row is None or outcome.custom_id in seen:
            continue  # not this app's line, an erased row's, or a repeat
        seen.add(outcome.custom_id)
        if outcome.kind == "succeeded" and outcome.response is not None:
            answered.append((row, outcome))
        elif row.held and not (cancelled and outcome.kind == "canceled"):
            failures.append(LineFailure(row.queue_id, row.dispatch_seq,
                                        _code(outcome.kind, outcome.error)))
    missing = "batch_failed" if polled.state == "failed" else f"batch_{polled.missing}"
    if not (cancelled and polled.missing == "canceled"):
        failures += [LineFailure(r.queue_id, r.dispatch_seq, missing)
                     for cid, r in lines.items() if r.held and cid not in seen]
    if answered:
        found = {row.custom_id: outcome for row, outcome in answered}
        items: list[dict[str, Any]] = []
        for kind, rows in by_kind([row for row, _ in answered]).items():
            items += await packer.modes(kind).parse(packer.provider.name, [
                _response(packer, row, found[row.custom_id]) for row in rows])
        settled = await packer.settle(items)
        report.applied += len(answered) - len(settled)
        held = {(r.queue_id, r.dispatch_seq) for r in lines.values() if r.held}
        failures += [f for f in settled if (f.queue_id, f.dispatch_seq) in held]
    report.failed_lines += await packer.store.batch_lines_failed(
        failures, packer.config.max_attempts, packer.config.window_seconds, packer.config.attempts)


def _response(packer: Packer, row: BatchRow, outcome: Outcome) -> dict[str, Any]:
    job = packer.job_body(row)
    return {"queue_id": str(row.queue_id), "callback_token": job["callback_token"],
            "response": outcome.response, "job": job}


def _code(kind: str, error: str | None) -> str:
    """A stored code for a line that gave no mark (content-free: made by the client)."""
    return error if error and error.replace("_", "").isalnum() else f"batch_{kind}"


async def _delete(packer: Packer, batch: LaneBatch, handle: Handle, report: StepReport) -> None:
    """Delete what the provider keeps; while it can't yet, look again next step."""
    if await packer.provider.delete(handle):
        await packer.store.batch_mark(batch.id, "done", (), 0)
        report.deleted += 1
    else:
        await packer.store.batch_mark(batch.id, "ended", handle.files, packer.config.poll_seconds)


async def step(packer: Packer, now: float | None = None) -> StepReport:
    """One lane step, as the cron and the chain run it: reconcile, poll, pack."""
    report = StepReport()
    await reconcile(packer, report)
    await poll(packer, report, now)
    await pack(packer, report)
    return report

