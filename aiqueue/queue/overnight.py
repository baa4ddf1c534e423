"""The overnight lane wired to the queue (§9f): the ports aiqueue/batch works over.

Results are applied by the webhook's own path (`parse_item` + `apply_item`):
the token check, exactly-once, the review record and the counters are the
same as for a callback. A batch result's cost is the live price times the
lane's price factor (half unless declared).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from aiqueue import logs
from aiqueue.batch.connect import connect
from aiqueue.batch.function import FunctionModes
from aiqueue.batch.lane import Lane, LaneConfig, StepReport, live_estimate
from aiqueue.batch.poll import step
from aiqueue.batch_settings import BatchLaneSettings
from aiqueue.dispatch.invoke import dispatch_body
from aiqueue.errors import Invalid, StoreError
from aiqueue.models import Job, QueueId
from aiqueue.models.batch import BatchRow, LineFailure
from aiqueue.ports import OvernightStore
from aiqueue.queue.results import apply_item, parse_item
from aiqueue.queue.spend import cost_usd
from aiqueue.runtime import Runtime

POOL = "default"
# Without a deadline, a batch-lane row is due by this long after its enqueue.
DEFAULT_DEADLINE = timedelta(hours=24)
# The chain runs the lane's step at most this often per instance (the cron always).
LANE_EVERY = 10.0
# How long the record of a finished batch is kept (its ids only; no content).
BATCH_RECORDS_KEPT = 30 * 86400.0
# One row's live time when nothing was marked live lately.
DEFAULT_LIVE_SECONDS = 60.0


@dataclass
class LaneTimer:
    """This instance's lane timer (kept in Runtime.own)."""

    # monotonic time when this instance next runs the lane's step from the chain
    due: float = 0.0


def lane_config(rt: Runtime[OvernightStore], lane: BatchLaneSettings) -> LaneConfig:
    s = rt.settings
    return LaneConfig(pool=POOL, model=lane.model, max_attempts=s.max_attempts,
                      slots=s.max_in_flight, margin_seconds=lane.margin_seconds)


async def run_if_due(rt: Runtime[OvernightStore], force: bool) -> None:
    """The lane's step from the cron (`force`) and, at most every LANE_EVERY seconds, the chain.

    The lane is an extra: whatever goes wrong in it must not stop the live
    step it rides on, so an unexpected error is logged (its type only) and
    the next step tries again.
    """
    now = time.monotonic()
    timer = rt.own(LaneTimer)
    if rt.settings.batch_lane is None or (not force and now < timer.due):
        return
    timer.due = now + LANE_EVERY
    try:
        await run(rt)
    except StoreError:
        raise
    except Exception as exc:  # an SDK's surprise; the batch's hold brings it back
        logs.event("batch_lane_failed", error_type=type(exc).__name__)


async def run(rt: Runtime[OvernightStore], config: LaneConfig | None = None,
              now: float | None = None) -> StepReport | None:
    """One lane step for the default pool (None: it has no batch lane).

    `now` (epoch seconds) is the time the fallback reckons with; the bench runs
    the lane on an emulated clock.
    """
    settings = rt.settings.batch_lane
    if settings is None:
        return None
    provider = connect(settings.provider, settings.base_url, settings.api_key)
    lane = Lane(store=rt.store, provider=provider, modes=FunctionModes(rt.http, rt.settings),
                settle=lambda items: settle(rt, items, settings.price_factor),
                job_body=lambda row: job_body(rt, row),
                config=config or lane_config(rt, settings))
    try:
        report = await step(lane, now)
    finally:
        await provider.aclose()
    await rt.store.batch_prune(BATCH_RECORDS_KEPT)
    if report.packed or report.applied or report.failed_lines or report.fell_back \
            or report.errors:
        logs.event("batch_lane", packed=report.packed, applied=report.applied,
                   failed_lines=report.failed_lines, fell_back=report.fell_back,
                   released=report.released, deleted=report.deleted,
                   code=",".join(sorted(set(report.errors))) or None)
    return report


def job_body(rt: Runtime[OvernightStore], row: BatchRow) -> dict[str, Any]:
    """The row's dispatch body (§4), the same a live dispatch would carry."""
    job = Job(queue_id=row.queue_id, submission_id=row.submission_id,
              assignment_id=row.assignment_id, attempt=row.attempt,
              dispatch_seq=row.dispatch_seq, payload=row.payload, content=row.content)
    return dispatch_body(job, rt.settings, rt.tokens)


async def settle(rt: Runtime[OvernightStore], raw_items: Sequence[dict[str, Any]],
                 price_factor: float) -> list[LineFailure]:
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
        # The batch price: the live price times the lane's factor; the lane is
        # recorded with the result so that the report splits cost by lane.
        usage: dict[str, Any] = {**(item.usage or {}), "lane": "batch"}
        cost = cost_usd(item.usage, rt.settings.model_prices)
        if cost is not None:
            usage["cost_usd"] = cost * price_factor
        await apply_item(rt, dataclasses.replace(item, usage=usage))
    return failures


async def lane_times(rt: Runtime[OvernightStore], deadline: datetime | None
                     ) -> tuple[datetime, datetime]:
    """(deadline, live time) of rows enqueued on the batch lane now.

    The live time is when such a row goes live if no batch has taken it: its
    deadline less the margin and one row's live time.
    """
    lane = rt.settings.batch_lane
    assert lane is not None
    due = deadline or datetime.now(UTC) + DEFAULT_DEADLINE
    per_row = await rt.store.batch_live_seconds() or DEFAULT_LIVE_SECONDS
    live_at = due - timedelta(seconds=lane.margin_seconds
                              + live_estimate(1, per_row, rt.settings.max_in_flight))
    return due, live_at
