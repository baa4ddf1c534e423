"""Packing rows into a provider batch, and reconciling a packing that crashed.

The lane works over narrow ports (a store, a provider, the function's modes,
and `Settle`, the webhook's apply path), so the queue's rules above wire it
and the tests drive it with the real database and the emulators.

Packing is crash-safe by order: one statement records the batch
('submitting') and moves its rows into it; only then is the provider called;
then the provider's id is recorded. A step that dies in between leaves a
'submitting' record, which a later step reconciles: the provider has the
batch (found by its tag or, for Anthropic, its time and size), or the rows go
back to waiting. A row is in one batch at most, and a waiting row is never in
none.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

from aiqueue.batch.function import FunctionModeError, Rendered
from aiqueue.batch.provider import Handle, Line, Provider, ProviderError
from aiqueue.models.batch import BatchRow, BatchState, LaneBatch, LineFailure

# The webhook's apply path for parsed items: applies `completed` ones once
# (exactly-once, first result wins) and returns the failures to handle.
Settle = Callable[[Sequence[dict[str, Any]]], Awaitable[list[LineFailure]]]
# The dispatch body (§4) of one row in a batch: what `render` and `parse` read.
JobBody = Callable[[BatchRow], dict[str, Any]]


class LaneStore(Protocol):
    """The lane's statements (aiqueue/db/batch.py)."""

    async def batch_open(self, pool: str, provider: str, model: str, limit: int,
                         money: str | None = None) -> list[BatchRow]: ...
    async def batch_submitted(self, batch_id: int, provider_batch_id: str,
                              files: Sequence[str], look_in: float) -> bool: ...
    async def batch_release(self, batch_id: int, queue_ids: Sequence[UUID] | None = None
                            ) -> int: ...
    async def batch_abandon(self, batch_id: int, error: str) -> bool: ...
    async def batches_stale(self, pool: str, older_than: float) -> list[LaneBatch]: ...
    async def batches_due(self, pool: str, lease: float) -> list[LaneBatch]: ...
    async def batch_rows(self, batch_id: int) -> list[BatchRow]: ...
    async def batch_lines(self, batch_id: int) -> list[BatchRow]: ...
    async def batch_lines_failed(self, failures: Sequence[LineFailure], max_attempts: int,
                                 window: float, attempts: str | None = None) -> int: ...
    async def batch_fallback(self, batch_id: int) -> int: ...
    async def batch_mark(self, batch_id: int, state: BatchState, files: Sequence[str],
                         look_in: float) -> None: ...
    async def batch_live_seconds(self) -> float | None: ...


class Modes(Protocol):
    """The marking function's render and parse modes (aiqueue/batch/function.py)."""

    async def render(self, provider: str, model: str, jobs: Sequence[dict[str, Any]]
                     ) -> Rendered: ...
    async def parse(self, provider: str, responses: Sequence[dict[str, Any]]
                    ) -> list[dict[str, Any]]: ...


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
    limit = min(cfg.max_requests or limits.max_requests, limits.max_requests)
    rows = await packer.store.batch_open(cfg.pool, packer.provider.name, cfg.model, limit,
                                       cfg.money)
    if not rows:
        return
    batch_id = rows[0].batch_id
    try:
        rendered = await _render(packer, rows)
    except FunctionModeError as exc:
        await _give_back(packer, batch_id, exc.code, report)
        return
    # Jobs the function can never mark fail now, as on the live path.
    report.failed_lines += len(await packer.settle(rendered.items))
    lines, surplus = _fit(rows, rendered, limits.max_bytes)
    if surplus:
        report.released += await packer.store.batch_release(batch_id, surplus)
    if not lines:
        await _give_back(packer, batch_id, "nothing_to_send", report)
        return
    try:
        handle = await packer.provider.submit(lines, tag=str(batch_id))
    except ProviderError as exc:
        await _give_back(packer, batch_id, exc.code, report)
        return
    if not await packer.store.batch_submitted(batch_id, handle.batch_id, handle.files,
                                            cfg.poll_seconds):
        # A reconcile gave the rows back meanwhile: what was just created must go.
        await _withdraw(packer, handle)
        return
    report.packed += len(lines)
    report.batches += 1


def by_kind(rows: Sequence[BatchRow]) -> dict[str, list[BatchRow]]:
    """Rows grouped by kind, in their order."""
    groups: dict[str, list[BatchRow]] = {}
    for row in rows:
        groups.setdefault(row.kind, []).append(row)
    return groups


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


async def _give_back(packer: Packer, batch_id: int, code: str, report: StepReport) -> None:
    """The provider never got the batch: its rows wait again, without the attempt.

    The record is ended first: a slow step that records its provider batch
    after this finds it abandoned (and withdraws the batch), never the reverse.
    """
    report.errors.append(code)
    if await packer.store.batch_abandon(batch_id, code):
        report.released += await packer.store.batch_release(batch_id)


async def _withdraw(packer: Packer, handle: Handle) -> None:
    """Cancel and delete a provider batch the lane no longer owns (best effort)."""
    try:
        await packer.provider.cancel(handle)
        await packer.provider.delete(handle)
    except ProviderError:
        pass  # the provider's own window ends it; its results match no held row


async def reconcile(packer: Packer, report: StepReport) -> None:
    """Settle batches left 'submitting' by a step that died between record and create."""
    cfg = packer.config
    for batch in await packer.store.batches_stale(cfg.pool, cfg.submit_grace_seconds):
        rows = await packer.store.batch_rows(batch.id)
        try:
            found = await packer.provider.find(str(batch.id), len(rows), batch.created_at)
        except ProviderError as exc:
            report.errors.append(exc.code)
            continue  # ask again next step
        if found is not None and rows:
            await packer.store.batch_submitted(batch.id, found.batch_id, found.files,
                                             cfg.poll_seconds)
            continue
        if found is not None:
            await _withdraw(packer, found)
        await _give_back(packer, batch.id, "not_created", report)
