"""Packing rows into a provider batch, and reconciling a packing that crashed.

The lane works over narrow ports (a store, a provider, the function's modes,
and `Settle`, the webhook's apply path), so the queue's rules above wire it
and the tests drive it with the real database and the emulators.

Packing is crash-safe by order: one statement records the batch
('submitting') and moves its rows into it; each create at the provider (the
input file, the batch) is recorded before it is asked for and its answer
right after. A step that dies or loses an answer in between leaves a record
that a later step reconciles (reconcile.py). A row is in one batch at most,
and a waiting row is never in none.

One step's lane work is bounded (`Packer.until`): rendering stops in time
for the upload, and the rows not rendered wait for the next step.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from aiqueue.batch.function import FunctionModeError, Rendered
from aiqueue.batch.ports import JobBody, LaneStore, Modes, Settle
from aiqueue.batch.provider import UNSURE, Handle, Line, Provider, ProviderError
from aiqueue.models.batch import BatchRow


@dataclass(frozen=True)
class LaneConfig:
    """One pool's batch lane."""

    pool: str
    model: str
    max_attempts: int
    # Live capacity for the fallback's estimate (QUEUE_MAX_IN_FLIGHT; 0: unlimited).
    slots: int = 1
    margin_seconds: float = 900.0
    window_seconds: float = 24 * 3600.0
    # Without recent live marking to go by, one row takes this long live.
    default_live_seconds: float = 60.0
    # A 'submitting' record older than this is reconciled (its step is gone).
    submit_grace_seconds: float = 300.0
    # How long one step holds a batch it looks at; how often a running one is looked at.
    poll_seconds: float = 30.0
    # At most this many rows per batch (None: the provider's limit).
    max_requests: int | None = None
    # The money plan (aiqueue/settings/money.py) packing charges turns and spend by, at
    # batch prices.
    money: str | None = None
    # The kinds' own max attempts ({kind: n} as JSON; QueueConfig.attempts).
    attempts: str | None = None
    # How long one call to the provider may take (a lost answer is reconciled).
    call_seconds: float = 20.0
    # Rows packing takes (and renders) at a time; between chunks the step's time is checked.
    render_rows: int = 250
    # Rendering stops this long before the step's end, to leave time to upload.
    upload_seconds: float = 5.0
    # Where the provider's batch API is and the variable holding its key (kept with each
    # batch); `packs`: False for a pool that no longer declares one (its batches are
    # still looked at, nothing new is packed).
    base_url: str | None = None
    key_env: str | None = None
    packs: bool = True


@dataclass
class Packer:
    """The ports of one pool's lane, which pack, reconcile and poll work over; `modes` gives
    a kind's function (rows of a pool's kinds share one provider batch, each rendered and
    parsed by its own kind's function)."""

    store: LaneStore
    provider: Provider
    modes: Callable[[str], Modes]
    settle: Settle
    job_body: JobBody
    config: LaneConfig
    # time.monotonic() by which this step's lane work ends (the rest waits)
    until: float = math.inf

    def left(self) -> float:
        """Seconds of this step's lane work left."""
        return self.until - time.monotonic()


@dataclass
class StepReport:
    """What one lane step did (figures for logs and tests)."""

    packed: int = 0
    batches: int = 0
    applied: int = 0
    failed_lines: int = 0
    fell_back: int = 0
    released: int = 0
    deleted: int = 0
    errors: list[str] = field(default_factory=list)


def live_estimate(rows: int, per_row: float, slots: int) -> float:
    """Seconds live marking would take for `rows` rows: rounds of `slots` at a time."""
    lanes = rows if slots <= 0 else slots
    return math.ceil(rows / max(lanes, 1)) * per_row


async def pack(packer: Packer, report: StepReport) -> None:
    """Pack the pool's waiting rows into one provider batch (none waiting: nothing)."""
    cfg, limits = packer.config, packer.provider.limits
    if packer.left() <= 2 * cfg.upload_seconds:
        return  # this step's lane time is spent: the next step packs
    limit = min(cfg.max_requests or limits.max_requests, limits.max_requests)
    rows = await packer.store.batch_open(cfg.pool, packer.provider.name, cfg.model,
                                         min(cfg.render_rows, limit), cfg.money,
                                         cfg.base_url, cfg.key_env)
    if not rows:
        return
    batch_id = rows[0].batch_id
    try:
        taken, rendered = await _take(packer, batch_id, rows, limit)
    except FunctionModeError as exc:
        await give_back(packer, batch_id, exc.code, report)
        return
    # Jobs the function can never mark fail now, as on the live path.
    report.failed_lines += len(await packer.settle(rendered.items))
    # Erasure wins: a row erased while it was rendered is not in the batch any more.
    held = await packer.store.batch_held(batch_id)
    lines, surplus = _fit([r for r in taken if r.queue_id in held], rendered,
                          limits.max_bytes)
    if surplus:
        report.released += await packer.store.batch_release(batch_id, surplus)
    if not lines:
        await give_back(packer, batch_id, "nothing_to_send", report)
        return
    await _submit(packer, batch_id, lines, report)


async def _submit(packer: Packer, batch_id: int, lines: Sequence[Line],
                  report: StepReport) -> None:
    """Upload and create, each recorded before it is asked for (reconcile.py)."""
    tag = await packer.store.batch_tag(batch_id)
    files: tuple[str, ...] = ()
    stage = "upload"
    try:
        if not await packer.store.batch_intent(batch_id, len(lines), files):
            return  # a reconcile gave the rows back meanwhile
        files = await packer.provider.upload(lines, tag)
        if files and not await packer.store.batch_intent(batch_id, len(lines), files):
            await packer.provider.delete_files(files)
            return
        stage = "create"
        handle = await packer.provider.create(lines, tag, files)
    except ProviderError as exc:
        if stage == "create" and exc.code in UNSURE:
            # The provider may have made it: the next step looks for it by its tag.
            report.errors.append(exc.code)
            await packer.store.batch_unsure(batch_id, exc.code)
            return
        # An upload whose answer was lost may have stored the file: clearing finds it by
        # its tag. A refused create's file is deleted now.
        await give_back(packer, batch_id, exc.code, report, files=files,
                        clearing=stage == "upload" and exc.code in UNSURE)
        return
    if not await packer.store.batch_submitted(batch_id, handle.batch_id, handle.files,
                                              packer.config.poll_seconds):
        # A reconcile gave the rows back meanwhile: what was just created must go.
        await withdraw(packer, batch_id, handle.batch_id, handle.files)
        return
    report.packed += len(lines)
    report.batches += 1


async def give_back(packer: Packer, batch_id: int, code: str, report: StepReport, *,
                    files: Sequence[str] = (), clearing: bool = False) -> None:
    """The provider never got the batch: its rows wait again, without the attempt.

    The record is ended first: a slow step that records its provider batch
    after this finds it ended (and withdraws the batch), never the reverse.
    `clearing`: the provider may still keep a file or a batch of it, which later
    steps look for and delete (reconcile.py); else what `files` names goes now.
    """
    report.errors.append(code)
    store = packer.store
    if clearing:
        ended = await store.batch_clear(batch_id, code, files, 0.0)
    else:
        ended = await store.batch_abandon(batch_id, code)
    if ended:
        report.released += await store.batch_release(batch_id)
    if files and not clearing:
        try:
            await packer.provider.delete_files(files)
        except ProviderError:
            await store.batch_clear(batch_id, code, files, packer.config.poll_seconds)


async def withdraw(packer: Packer, batch_id: int, provider_batch_id: str,
                   files: Sequence[str]) -> None:
    """A provider batch the lane no longer packs rows into: cancelled, then looked at
    like any cancelled batch (poll.py) until everything of it is deleted."""
    try:
        await packer.provider.cancel(Handle(provider_batch_id, tuple(files)))
    except ProviderError:
        pass  # asked again when it is next looked at
    await packer.store.batch_withdrawn(batch_id, provider_batch_id, files)


def by_kind(rows: Sequence[BatchRow]) -> dict[str, list[BatchRow]]:
    """Rows grouped by kind, in their order."""
    groups: dict[str, list[BatchRow]] = {}
    for row in rows:
        groups.setdefault(row.kind, []).append(row)
    return groups


async def _take(packer: Packer, batch_id: int, rows: list[BatchRow], limit: int
                ) -> tuple[list[BatchRow], Rendered]:
    """Render the rows taken, and take and render more a chunk at a time (each chunk one
    short transaction), while the provider's limit and the step's time allow: rendering
    stops `upload_seconds` before the step's end, to leave time to upload."""
    cfg = packer.config
    taken, rendered = list(rows), Rendered({}, [])
    while rows:
        part = await _render(packer, rows)
        rendered.requests.update(part.requests)
        rendered.items.extend(part.items)
        room = limit - len(taken)
        if room <= 0 or len(rows) < cfg.render_rows or packer.left() <= cfg.upload_seconds:
            break
        rows = await packer.store.batch_add(cfg.pool, batch_id, min(cfg.render_rows, room),
                                            cfg.money)
        taken += rows
    return taken, rendered


async def _render(packer: Packer, rows: Sequence[BatchRow]) -> Rendered:
    """Each kind's rows rendered by its own function, as one set of provider requests."""
    requests: dict[str, dict[str, Any]] = {}
    items: list[dict[str, Any]] = []
    for kind, group in by_kind(rows).items():
        part = await packer.modes(kind).render(packer.provider.name, packer.config.model,
                                               [packer.job_body(r) for r in group])
        requests |= part.requests
        items += part.items
    return Rendered(requests, items)


def _fit(rows: Sequence[BatchRow], rendered: Rendered, max_bytes: int
         ) -> tuple[list[Line], list[UUID]]:
    """The lines that fit the provider's size limit, and the rows left over."""
    lines: list[Line] = []
    surplus: list[UUID] = []
    size = 0
    for row in rows:
        body = rendered.requests.get(str(row.queue_id))
        if body is None:
            continue  # failed by render (settled above)
        # A JSONL line of OpenAI's file is about the body plus the envelope.
        length = len(json.dumps(body)) + 200
        if size + length > max_bytes:
            surplus.append(row.queue_id)
            continue
        size += length
        lines.append(Line(row.custom_id, body))
    return lines, surplus
