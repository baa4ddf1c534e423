"""The overnight lane wired to the queue (docs/overnight.md): the ports aiqueue/batch works over.

Every pool that declares a provider's batch API (`[pools.*] batch`, aiqueue.toml)
has its own lane: its rows are packed into its own provider batches, polled and
fallen back on its own.  Results are applied by the webhook's own path
(`parse_item` + `apply_item`): the token check, exactly-once, the review record
and the counters are the same as for a callback.  A batch result costs the
pool's batch price (declared, else half of live).  Which lane an enqueue takes is
`lane_of`: the one it names, else its kind's default.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from aiqueue import logs
from aiqueue.batch.connect import connect
from aiqueue.batch.function import FunctionModes
from aiqueue.batch.pack import LaneConfig, Packer, StepReport, live_estimate
from aiqueue.batch.poll import step
from aiqueue.dispatch.invoke import dispatch_body
from aiqueue.errors import Invalid, StoreError
from aiqueue.models import Job, QueueId
from aiqueue.models.batch import BatchRow, LineFailure
from aiqueue.ports import OvernightStore
from aiqueue.queue import orphans
from aiqueue.queue.orphans import Account
from aiqueue.queue.results import apply_item, parse_item
from aiqueue.runtime import Runtime
from aiqueue.settings.kinds import BATCH_SHARE, Lane, Pool
from aiqueue.wire import EnqueueRequest

# Without a deadline, a batch-lane row is due by this long after its enqueue.
DEFAULT_DEADLINE = timedelta(hours=24)
# The chain runs the lane's step at most this often per instance (the cron always),
# and sooner when a batch's next look (its fallback point among them) comes first.
LANE_EVERY = 10.0
# The chain runs the lane's step for a batch's look at most this often per instance.
LOOK_AT_MOST = 1.0
# One step's lane work, all pools together (packing, polling, applying): the rest
# waits for the next step.
LANE_SECONDS = 20.0
# How long the record of a finished batch is kept (its ids only; no content).
BATCH_RECORDS_KEPT = 30 * 86400.0
# One row's live time when nothing was marked live lately.
DEFAULT_LIVE_SECONDS = 60.0


@dataclass
class LaneTimer:
    """This instance's lane timer (kept in Runtime.own)."""

    # monotonic time when this instance next runs the lane's step from the chain
    due: float = 0.0
    # monotonic time of the next look at a batch the last step knew of
    look: float = math.inf
    # a sync-mode step left its lane step to run beside its sync call: its `force`
    deferred: bool | None = None


def lane_of(rt: Runtime, request: EnqueueRequest) -> Lane:
    """The lane the request asks for, else its kind's (`lane` in `[kinds.*]`).

    422 when the batch lane's pool declares no batch API, or a deadline comes
    with the live lane.  The kind must be known (the caller checks it first).
    """
    kind = rt.settings.queue.kind(request.kind)
    lane = request.lane or kind.lane
    if lane == "live" and request.deadline is not None:
        raise Invalid(f'deadline is for "lane": "batch" only; kind {kind.name!r} takes the '
                      "live lane")
    if lane == "batch" and rt.settings.queue.pools[kind.pool].batch is None:
        raise Invalid(f'lane "batch" needs a pool with a batch API: kind {kind.name!r} is in '
                      f"pool {kind.pool!r}, which declares none (pools.{kind.pool}.batch in "
                      "aiqueue.toml)", extra={"pool": kind.pool})
    return lane


def lane_config(rt: Runtime[OvernightStore], pool: Pool) -> LaneConfig:
    """The lane of a pool that declares a batch API."""
    s = rt.settings
    assert pool.batch_model is not None, "config.load checks batch_model with batch"
    return LaneConfig(pool=pool.name, model=pool.batch_model, max_attempts=s.max_attempts,
                      slots=pool.max_in_flight, margin_seconds=s.batch_margin_seconds,
                      money=s.money.json(), attempts=s.queue.attempts,
                      base_url=pool.batch_base_url, key_env=pool.batch_key_env)


async def run_if_due(rt: Runtime[OvernightStore], force: bool) -> int:
    """Each pool's lane step from the cron (`force`) and, at most every LANE_EVERY seconds
    or when a batch's next look has come, the chain; the rows it sent live.

    Run after the step's live claim and dispatch, never before: a live dispatch
    does not wait behind the lane.  The lane is an extra: whatever goes wrong in
    it must not stop the live step it rides on, so an unexpected error is logged
    (its type only) and the next step tries again.  One pool's trouble stops no
    other pool's lane.
    """
    now = time.monotonic()
    timer = rt.own(LaneTimer)
    if not force and now < min(timer.due, timer.look):
        return 0
    timer.due, timer.look = now + LANE_EVERY, math.inf
    until, fell_back = now + LANE_SECONDS, 0
    pools = rt.settings.queue.batch_pools
    # A pool that stopped declaring its batch API still has its batches looked at.
    lanes = [(lane_config(rt, p), declared(p)) for p in pools] + \
        await orphans.lanes(rt, [p.name for p in pools])
    for config, account in lanes:
        try:
            fell_back += (await run(rt, config, until=until, account=account)).fell_back
        except StoreError:
            raise
        except Exception as exc:  # an SDK's surprise; the batch's hold brings it back
            logs.event("batch_lane_failed", pool=config.pool, error_type=type(exc).__name__)
    wait = await rt.store.batch_next_look()
    # At most one lane step a second per instance, however overdue a look is.
    timer.look = math.inf if wait is None else time.monotonic() + max(wait, LOOK_AT_MOST)
    return fell_back


def defer(rt: Runtime[OvernightStore], force: bool) -> None:
    """A sync-mode step hands its lane step to run beside its sync call (run_deferred)."""
    timer = rt.own(LaneTimer)
    timer.deferred = force or bool(timer.deferred)


async def run_deferred(rt: Runtime[OvernightStore]) -> int:
    """The lane step a sync-mode step deferred, if any."""
    timer = rt.own(LaneTimer)
    force, timer.deferred = timer.deferred, None
    return 0 if force is None else await run_if_due(rt, force)


def next_look(rt: Runtime[OvernightStore]) -> float | None:
    """Seconds until the lane's next look at a batch is due (None: none known)."""
    look = rt.own(LaneTimer).look
    return None if math.isinf(look) else max(look - time.monotonic(), 0.0)


def declared(pool: Pool) -> Account:
    """The batch account a pool declares (it must declare one)."""
    assert pool.batch is not None and pool.batch_base_url and pool.batch_api_key
    return Account(pool.batch, pool.batch_base_url, pool.batch_api_key)


async def run(rt: Runtime[OvernightStore], config: LaneConfig, now: float | None = None,
              until: float = math.inf, account: Account | None = None) -> StepReport:
    """One lane step for the pool `config` names, on `account` (default: the one the pool
    declares), its work ending by `until` (time.monotonic()).

    `now` (epoch seconds) is the time the fallback reckons with; the bench runs
    the lane on an emulated clock.
    """
    account = account or declared(rt.settings.queue.pools[config.pool])
    # No one call to the provider outlasts the step's lane time.  Made in a thread: the
    # first use imports the provider's SDK, seconds of work that would otherwise stall
    # every other request of this instance (their database budgets run out meanwhile).
    provider = await asyncio.to_thread(connect, account.provider, account.base_url,
                                       account.key, min(config.call_seconds, LANE_SECONDS))
    packer = Packer(store=rt.store, provider=provider,
                    modes=lambda kind: FunctionModes(rt.http, rt.settings.target(kind)),
                    settle=lambda items: settle(rt, items),
                    job_body=lambda row: job_body(rt, row), config=config, until=until)
    try:
        report = await step(packer, now)
    finally:
        await provider.aclose()
    await rt.store.batch_prune(BATCH_RECORDS_KEPT)
    if report.packed or report.applied or report.failed_lines or report.fell_back \
            or report.errors:
        logs.event("batch_lane", pool=config.pool, packed=report.packed,
                   applied=report.applied,
                   failed_lines=report.failed_lines, fell_back=report.fell_back,
                   released=report.released, deleted=report.deleted,
                   code=",".join(sorted(set(report.errors))) or None)
    return report


def job_body(rt: Runtime[OvernightStore], row: BatchRow) -> dict[str, Any]:
    """The row's dispatch body (docs/reference/api.md), the same a live dispatch would carry."""
    job = Job(queue_id=row.queue_id, submission_id=row.submission_id,
              assignment_id=row.assignment_id, attempt=row.attempt,
              dispatch_seq=row.dispatch_seq, payload_json=json.dumps(row.payload),
              content=row.content, cache_key=row.cache_key)
    return dispatch_body(job, rt.settings.target(), rt.tokens)


async def settle(rt: Runtime[OvernightStore], raw_items: Sequence[dict[str, Any]]
                 ) -> list[LineFailure]:
    """Apply parsed items as the webhook would; return the failures for the lane."""
    failures: list[LineFailure] = []
    for raw in raw_items:
        try:
            item = parse_item(raw, rt.tokens)
        except Invalid:
            continue  # not an item: its line stays unanswered and fails as such
        if item is None or item.status == "progress":
            continue
        if item.status == "failed":
            failures.append(LineFailure(QueueId(item.claim.queue_id), item.claim.dispatch_seq,
                                        item.error_code, item.retryable))
            continue
        # The lane is recorded with the result: the store prices it at the pool's
        # batch price of its billed tokens (docs/overnight.md), and the report
        # splits cost by lane.
        usage: dict[str, Any] = {**(item.usage or {}), "lane": "batch"}
        await apply_item(rt, dataclasses.replace(item, usage=usage))
    return failures


async def lane_times(rt: Runtime[OvernightStore], pool: str, deadline: datetime | None
                     ) -> tuple[datetime, datetime]:
    """(deadline, live time) of `pool`'s rows enqueued on the batch lane now.

    The live time is when such a row goes live if no batch has taken it: its
    deadline less the margin and one row's live time.
    """
    due = deadline or datetime.now(UTC) + DEFAULT_DEADLINE
    per_row = await rt.store.batch_live_seconds() or DEFAULT_LIVE_SECONDS
    slots = rt.settings.queue.pools[pool].max_in_flight
    live_at = due - timedelta(seconds=rt.settings.batch_margin_seconds
                              + live_estimate(1, per_row, slots))
    return due, live_at


def price_share(rt: Runtime[OvernightStore], pool: str) -> float:
    """The batch lane's price as a share of live for the pool's batch model (the page's
    "half price"): its declared batch price over its live price, else BATCH_SHARE."""
    queue = rt.settings.queue
    model = queue.pools[pool].batch_model or ""
    live, batch = queue.prices.get(model), queue.batch_price(pool, model)
    if live is None or batch is None or not live[0] + live[1]:
        return BATCH_SHARE
    return (batch[0] + batch[1]) / (live[0] + live[1])
