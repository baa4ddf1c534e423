"""A shared model's money (docs/concepts.md): each pool's spend caps and prices for the claim.

The rules themselves live in SQL (db/sql/functions/40_fair.sql, 50_spend.sql):
turns by tokens, the spend windows, the estimate.  This gathers what
they need of the settings into one JSON document sent with each claim and
result (`Money.doc`) inside the claim plan (settings/plan.py), the one document the
claim's SQL reads of a configuration.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from aiqueue.settings.env import ModelPrice
from aiqueue.settings.kinds import QueueConfig

# The caps' names, as the TOML file, the dry run's `capped` and the pages say them.
CAP_NAMES = ("group_usd_per_hour", "group_usd_per_day", "pool_usd_per_day")


@dataclass(frozen=True)
class PoolMoney:
    """One pool's caps (USD; None: no cap) and its prices per model, live and on the batch
    lane (docs/overnight.md: declared, else half of live)."""

    caps: Mapping[str, float | None] = field(default_factory=dict)
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    batch_prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    # The prompt cache's write and read prices, as multiples of the input price.
    cache: tuple[float, float] = (1.0, 0.10)

    @property
    def capped(self) -> bool:
        return any(v is not None for v in self.caps.values())

    @property
    def top(self) -> ModelPrice | None:
        """The most expensive known price: what a row of an unknown model is charged."""
        return _top(self.prices)

    # Where this pool's days begin (its own `timezone`, else QUEUE_TIMEZONE).
    timezone: str = "UTC"

    def doc(self, hour_seconds: float, day_seconds: float) -> dict[str, Any]:
        top, batch_top = self.top, _top(self.batch_prices)
        return {
            **{name: self.caps.get(name) for name in CAP_NAMES},
            "prices": {m: [p.input, p.output] for m, p in self.prices.items()},
            "top": [top.input, top.output] if top else None,
            "batch_prices": {m: [p.input, p.output] for m, p in self.batch_prices.items()},
            "batch_top": [batch_top.input, batch_top.output] if batch_top else None,
            "hour_seconds": hour_seconds,
            "day_seconds": day_seconds,
            "cache": {"write": self.cache[0], "read": self.cache[1]},
            "timezone": self.timezone,
        }


@dataclass(frozen=True)
class Money:
    """Every pool's money settings, and the length of the spend windows (hour, day)."""

    pools: Mapping[str, PoolMoney] = field(default_factory=dict)
    hour_seconds: float = 3600.0
    day_seconds: float = 86400.0

    @classmethod
    def of(cls, queue: QueueConfig, hour_seconds: float, day_seconds: float,
           timezone: str = "UTC") -> Money:
        """Every pool's caps and prices: the default pool's from QUEUE_*_USD_* and
        QUEUE_MODEL_PRICES, the others' from aiqueue.toml.

        Built once per Settings (`Settings.money`): every claim and result sends it.
        """
        pools = {
            name: PoolMoney(
                caps={cap: getattr(pool, cap) for cap in CAP_NAMES},
                prices={m: ModelPrice(*p) for m, p in pool.prices.items()},
                batch_prices={m: ModelPrice(*price) for m in {*pool.prices, *pool.batch_prices}
                              if (price := queue.batch_price(name, m)) is not None},
                cache=(pool.prompt_cache.write, pool.prompt_cache.read),
                timezone=pool.timezone or timezone)
            for name, pool in queue.pools.items()}
        return cls(pools, hour_seconds, day_seconds)

    @property
    def capped(self) -> bool:
        """Whether any pool has a spend cap (a paused row then comes due by itself)."""
        return any(p.capped for p in self.pools.values())

    def pool(self, name: str) -> PoolMoney:
        return self.pools.get(name) or PoolMoney()

    def doc(self) -> dict[str, Any] | None:
        """The claim's `money` parameter; None when no pool has a cap or a price."""
        if not any(p.capped or p.prices or p.cache != (1.0, 0.10)
                   for p in self.pools.values()):
            return None
        return {name: p.doc(self.hour_seconds, self.day_seconds)
                for name, p in self.pools.items()}

    @cached_property
    def _json(self) -> str | None:
        doc = self.doc()
        return None if doc is None else json.dumps(doc, separators=(",", ":"))

    def json(self) -> str | None:
        """`doc` as the jsonb text the SQL takes (serialised once)."""
        return self._json


def _top(prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    if not prices:
        return None
    return ModelPrice(max(p.input for p in prices.values()),
                      max(p.output for p in prices.values()))


NO_MONEY = Money()
