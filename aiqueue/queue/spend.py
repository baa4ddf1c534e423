"""What a result cost (the function's own figure, else priced from QUEUE_MODEL_PRICES), and
the estimate of what an enqueue would cost before it is sent (CONTRACT §9c).

The spend caps themselves are enforced by the claim, in SQL (functions.sql,
"A shared model's money"); aiqueue/settings/money.py carries their settings there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiqueue.errors import Invalid, UnknownKind
from aiqueue.models import DryRun
from aiqueue.queue.lanes import lane_of
from aiqueue.queue.progress import eta_seconds
from aiqueue.runtime import Runtime
from aiqueue.settings import ModelPrice
from aiqueue.settings.kinds import BATCH_SHARE, QueueConfig
from aiqueue.settings.money import PoolMoney
from aiqueue.wire import EnqueueRequest
from aiqueue.wire.answers import EnqueueEstimate, EstimatePart, SpendCaps


def cost_usd(usage: Mapping[str, Any] | None, prices: Mapping[str, ModelPrice]) -> float | None:
    """The function's own cost_usd, else priced from QUEUE_MODEL_PRICES, else unknown."""
    if not usage:
        return None
    sent = usage.get("cost_usd")
    if isinstance(sent, (int, float)) and not isinstance(sent, bool) and sent >= 0:
        return float(sent)
    price = prices.get(str(usage.get("model", "")))
    if price is None:
        return None
    counts = [usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)]
    if not all(isinstance(v, (int, float)) and v >= 0 for v in counts):
        return None
    prompt, completion = float(counts[0]), float(counts[1])
    return round((prompt * price.input + completion * price.output) / 1_000_000, 9)


def batch_cost(usage: Mapping[str, Any] | None, queue: QueueConfig, pool: str) -> float | None:
    """What a batch-lane result cost (§9f): its tokens at the pool's declared batch price,
    else its live cost (the function's, else priced) at BATCH_SHARE of it."""
    if not usage:
        return None
    model = str(usage.get("model", ""))
    declared = queue.pools[pool].batch_prices.get(model)
    if declared is not None:
        tokens_only = {k: v for k, v in usage.items() if k != "cost_usd"}
        cost = cost_usd(tokens_only, {model: ModelPrice(*declared)})
        if cost is not None:
            return cost
    live = cost_usd(usage, {m: ModelPrice(*p) for m, p in queue.prices.items()})
    return None if live is None else round(live * BATCH_SHARE, 9)


def priced(usage: dict[str, Any] | None, prices: Mapping[str, ModelPrice]
           ) -> dict[str, Any] | None:
    """The usage as stored: with its cost_usd when known (the function's or priced)."""
    cost = cost_usd(usage, prices)
    if usage is None or cost is None:
        return usage
    return {**usage, "cost_usd": cost}


async def dry_run(rt: Runtime, request: EnqueueRequest) -> EnqueueEstimate:
    """The estimate before Mark All (CONTRACT §9c): rows, tokens, cost, ETA and the caps
    that would stop the run; writes nothing.

    A row is expected to use what the assignment's recent rows used, else its
    pool's recent assignments, else a default (aiqueue_estimate).  On the batch
    lane (asked for, or the kind's default) it is priced at the pool's batch price.
    """
    money = rt.settings.money
    kinds = rt.settings.queue.kinds
    if request.kind not in kinds:
        raise UnknownKind(f"kind {request.kind!r} is not declared; the kinds are "
                          f"{', '.join(sorted(kinds))}", extra={"kinds": sorted(kinds)})
    batch = lane_of(rt, request) == "batch"
    pool = rt.settings.queue.pool_of(request.kind)
    d = await rt.store.dry_run(request.submission_ids, request.assignment_id,
                               group=request.group or request.assignment_id,
                               remark=request.remark, pool=pool.name, money=money)
    if d.unknown_ids:
        raise Invalid(f"{len(d.unknown_ids)} submission id(s) do not exist",
                      extra={"unknown_ids": [str(u) for u in d.unknown_ids]})
    row_cost = d.batch_row_cost_usd if batch else d.row_cost_usd
    first = min(request.calibrate.rows or len(request.calibrate.submission_ids or ()), d.rows) \
        if request.calibrate else 0
    # Calibration rows go live (the teacher is waiting for them); the rest at the lane's price.
    parts = [_part(d, first, d.row_cost_usd), _part(d, d.rows - first, row_cost)]
    costs = [p.estimated_cost_usd for p in parts]
    cost = None if None in costs else round(sum(c or 0 for c in costs), 6)
    avg = await rt.store.recent_processing_seconds() if d.rows else None
    eta = eta_seconds(d.ahead + d.rows - 1, pool.max_in_flight, avg) if d.rows else 0.0
    return EnqueueEstimate(
        rows=d.rows, already_marked=d.already_marked,
        estimated_tokens=round(d.rows * (d.prompt_tokens + d.completion_tokens)),
        estimated_cost_usd=cost, eta_seconds=eta,
        capped=would_stop(money.pool(pool.name), d, cost),
        **({"calibration": parts[0], "rest": parts[1]} if request.calibrate else {}))


def _part(d: DryRun, rows: int, row_cost: float | None) -> EstimatePart:
    return EstimatePart(rows=rows, estimated_tokens=round(rows * (d.prompt_tokens
                                                                  + d.completion_tokens)),
                        estimated_cost_usd=0.0 if rows == 0 else None if row_cost is None
                        else round(rows * row_cost, 6))


def would_stop(pool: PoolMoney, d: DryRun, cost: float | None) -> SpendCaps | None:
    """The caps this run's estimated cost would reach, on top of this window's spend."""
    if cost is None:
        return None
    spent = {"group_usd_per_hour": d.group_hour, "group_usd_per_day": d.group_day,
             "pool_usd_per_day": d.pool_day}
    stops = {name: cap for name, cap in pool.caps.items()
             if cap is not None and spent[name] + cost > cap}
    # Only the caps it would reach are set, so only they are sent.
    return SpendCaps(**stops) if stops else None
