"""A usage's cost as the function reported it, else at a model's price: the tools' and the
tests' reckoning.

Every result, live or on the batch lane, is priced by the store, in one place
(aiqueue_result_cost, in db/sql/functions/50_spend.sql): the function's own cost,
else the pool's price for its model, else the pool's most expensive known price; a
batch-lane result at the pool's batch price of its billed tokens (docs/overnight.md).

The spend caps themselves are enforced by the claim, in SQL (db/sql/functions/50_spend.sql,
and 42_fair_pick.sql); aiqueue/settings/money.py carries their settings there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiqueue.settings import ModelPrice


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
