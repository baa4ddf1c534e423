"""What a batch-lane result cost (the estimate before an enqueue is queue/enqueue.py's
dry_run).

A live result is priced by the store, in one place (aiqueue_result_cost, in
db/sql/functions/50_spend.sql): the function's own cost, else the pool's price
for its model, else the pool's most expensive known price (CONTRACT §9c).

The spend caps themselves are enforced by the claim, in SQL (db/sql/functions/50_spend.sql,
and 42_fair_pick.sql); aiqueue/settings/money.py carries their settings there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiqueue.settings import ModelPrice
from aiqueue.settings.kinds import BATCH_SHARE, QueueConfig


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
    # A pool removed since its batch was packed has no declared price any more.
    declared = queue.pools[pool].batch_prices.get(model) if pool in queue.pools else None
    if declared is not None:
        tokens_only = {k: v for k, v in usage.items() if k != "cost_usd"}
        cost = cost_usd(tokens_only, {model: ModelPrice(*declared)})
        if cost is not None:
            return cost
    live = cost_usd(usage, {m: ModelPrice(*p) for m, p in queue.prices.items()})
    return None if live is None else round(live * BATCH_SHARE, 9)
