"""Applying an ended batch's lines, in chunks a step's time allows.

Every answer goes through the function's `parse` and the webhook's apply path
(`Settle`), so a result is applied at most once whichever way it came: a row
that fell back to live and whose batch answer arrives too keeps the first. A
line that errored, expired or was never run uses an attempt and waits for the
next batch (or goes live once its live time or the provider's window has
come). A batch that failed as a whole (OpenAI's `failed`; Anthropic fails
lines, never a batch) is the provider's failure, not its rows': they wait for
the next batch (or go live) without using an attempt.

A step that runs out of time stops between chunks; the next look reads the
results again and skips the lines already applied (their rows have ended).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from aiqueue.batch.pack import Packer, StepReport, by_kind
from aiqueue.batch.provider import Outcome, Polled
from aiqueue.models.batch import BatchRow, LaneBatch, LineFailure

# Answers parsed and applied between two looks at the step's clock.
CHUNK = 500
# How applying a batch's results went: all applied; the step's time ran out
# first (look again at once); or no line of the results is this deployment's.
Applied = Literal["done", "more", "not_ours"]


@dataclass
class _Sorted:
    answered: list[tuple[BatchRow, Outcome]] = field(default_factory=list)
    failures: list[LineFailure] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    ours: int = 0


async def apply(packer: Packer, batch: LaneBatch, polled: Polled, report: StepReport
                ) -> Applied:
    """Apply an ended (or failed) batch's lines; lines without an answer fail.

    Lines our own cancel stopped are not failures: the caller sends them live.
    """
    store = packer.store
    lines = {r.custom_id: r for r in await store.batch_lines(batch.id)}
    outcomes = await packer.provider.results(polled) if polled.state == "ended" else []
    if polled.state == "failed":
        report.released += await store.batch_release(batch.id)
        report.errors.append("batch_failed")
        return "done"
    found = _sort(lines, outcomes, cancelled=batch.state == "cancelling")
    # (A batch whose rows were all erased has no lines left to tell by: it is ours.)
    if outcomes and lines and not found.ours:
        return "not_ours"
    for at in range(0, len(found.answered), CHUNK):
        if at and packer.left() <= 0:
            await _fail(packer, found.failures, report)
            return "more"
        await _settle(packer, found.answered[at:at + CHUNK], lines, found, report)
    if not (batch.state == "cancelling" and polled.missing == "canceled"):
        missing = f"batch_{polled.missing}"
        found.failures += [LineFailure(r.queue_id, r.dispatch_seq, missing)
                           for cid, r in lines.items() if r.held and cid not in found.seen]
    await _fail(packer, found.failures, report)
    return "done"


def _sort(lines: dict[str, BatchRow], outcomes: Sequence[Outcome], cancelled: bool) -> _Sorted:
    out = _Sorted()
    for outcome in outcomes:
        row = lines.get(outcome.custom_id)
        if row is None or outcome.custom_id in out.seen:
            continue  # not this app's line, an erased row's, or a repeat
        out.seen.add(outcome.custom_id)
        out.ours += 1
        if outcome.kind == "succeeded" and outcome.response is not None:
            if row.open:  # an ended row's answer was applied (or is moot)
                out.answered.append((row, outcome))
        elif row.held and not (cancelled and outcome.kind == "canceled"):
            out.failures.append(LineFailure(row.queue_id, row.dispatch_seq,
                                            _code(outcome.kind, outcome.error)))
    return out


async def _settle(packer: Packer, answered: Sequence[tuple[BatchRow, Outcome]],
                  lines: dict[str, BatchRow], found: _Sorted, report: StepReport) -> None:
    """Parse and apply one chunk of answers; what the function says failed, fails."""
    outcome_of = {row.custom_id: outcome for row, outcome in answered}
    items: list[dict[str, Any]] = []
    for kind, rows in by_kind([row for row, _ in answered]).items():
        items += await packer.modes(kind).parse(packer.provider.name, [
            _response(packer, row, outcome_of[row.custom_id]) for row in rows])
    settled = await packer.settle(items)
    report.applied += len(answered) - len(settled)
    held = {(r.queue_id, r.dispatch_seq) for r in lines.values() if r.held}
    found.failures += [f for f in settled if (f.queue_id, f.dispatch_seq) in held]


async def _fail(packer: Packer, failures: list[LineFailure], report: StepReport) -> None:
    cfg = packer.config
    report.failed_lines += await packer.store.batch_lines_failed(
        failures, cfg.max_attempts, cfg.window_seconds, cfg.attempts)
    failures.clear()


def _response(packer: Packer, row: BatchRow, outcome: Outcome) -> dict[str, Any]:
    job = packer.job_body(row)
    return {"queue_id": str(row.queue_id), "callback_token": job["callback_token"],
            "response": outcome.response, "job": job}


def _code(kind: str, error: str | None) -> str:
    """A stored code for a line that gave no mark (content-free: made by the client)."""
    return error if error and error.replace("_", "").isalnum() else f"batch_{kind}"
