"""Task kinds and model pools (docs/concepts.md): the shapes, and how aiqueue.toml's join
the default ones the environment builds.

A *kind* names what a row asks for and which function does it, and the lane
it takes by default; a *pool* is one model key with its own limits (the cap
for the learned limit L, declared budgets, prices, spend caps) and, if it
allows the overnight lane (docs/overnight.md), its provider's batch API.  Every kind
belongs to one pool.

Without a file there is one kind, `mark`, in one pool, `default`, both built
from the environment (`Settings.queue`): the file adds kinds and pools beside
them, and may redeclare either to change it (`[pools.default]` changes only
the keys it sets).  toml_load.py reads the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Literal

from aiqueue.answers import DEFAULT_SAME_ANSWERS, KindSameAnswers
from aiqueue.errors import SettingsError
from aiqueue.settings.canary import Canary
from aiqueue.settings.prompt_cache import PromptCache
from aiqueue.settings.targets import DispatchTarget, DoTarget, LambdaTarget

DEFAULT_KIND = "mark"
DEFAULT_POOL = "default"
# The lane a row takes (docs/overnight.md): live dispatch, or the overnight batch API.
Lane = Literal["live", "batch"]
BatchProvider = Literal["openai", "anthropic"]
# A model's batch price, unless the pool declares one: the providers' published
# discount on their batch APIs (OpenAI Batch, Anthropic Message Batches).
BATCH_SHARE = 0.5
Price = tuple[float, float]


@dataclass(frozen=True)
class Pool:
    """One model key and its limits."""

    name: str
    # The cap for L (0 = unlimited until the model first refuses).
    max_in_flight: int
    tokens_per_minute: int = 0
    requests_per_minute: int = 0
    # USD per 1M input / output tokens, per model.
    prices: Mapping[str, Price] = field(default_factory=dict, hash=False)
    # Spend caps (docs/concepts.md), in USD; None = none.
    group_usd_per_hour: float | None = None
    group_usd_per_day: float | None = None
    pool_usd_per_day: float | None = None
    # Where this pool's days begin for its daily caps (an IANA name); None: QUEUE_TIMEZONE.
    timezone: str | None = None
    # The overnight lane (docs/overnight.md): the provider's batch API; None = live only.
    batch: BatchProvider | None = None
    batch_base_url: str | None = None
    batch_key_env: str | None = None
    batch_model: str | None = None
    # USD per 1M tokens on the batch lane, per model (else BATCH_SHARE of live).
    batch_prices: Mapping[str, Price] = field(default_factory=dict, hash=False)
    # The value of the variable batch_key_env names (never written to the file).
    batch_api_key: str | None = field(default=None, repr=False, compare=False)
    # The provider's prompt cache (docs/prompt-cache.md).
    prompt_cache: PromptCache = PromptCache()
    # The keys the file set: a `[pools.default]` table changes only these.
    declared: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def budget_declared(self) -> bool:
        return self.tokens_per_minute > 0 or self.requests_per_minute > 0


@dataclass(frozen=True)
class Kind:
    """What a row asks for: the function that does it, its token, its cap and attempts."""

    name: str
    pool: str
    dispatch: DispatchTarget = "http"
    # The function's URL; for a DigitalOcean or Lambda kind, its web URL, which the
    # batch lane's render and parse modes are posted to.
    function_url: str | None = None
    # The value of the variable `token_env` names (never written to the file).
    function_token: str | None = field(default=None, repr=False)
    token_env: str | None = None
    digitalocean: DoTarget | None = None
    aws_lambda: LambdaTarget | None = None
    # A cap for this kind inside its pool (0 = none of its own).
    max_in_flight: int = 0
    # None: QUEUE_MAX_ATTEMPTS.
    max_attempts: int | None = None
    # The lane an enqueue of this kind takes when it names none.
    lane: Lane = "live"
    # Whether rows with the same answer share one mark when the enqueue does not
    # say, and how answers are compared (docs/same-answer.md).
    same_answers: KindSameAnswers = DEFAULT_SAME_ANSWERS
    # Ordered fallback: the kind whose function takes this kind's due
    # rows while this kind's pool has its circuit open or has refused every call for
    # `fallback_after_seconds`.
    fallback: str | None = None
    fallback_after_seconds: float = 120.0
    # Seconds one row is expected to take before any row of the kind has finished
    # (docs/concepts.md#an-estimate-first); None: unknown until the first marks.
    expected_seconds: float | None = None
    # A drift canary (docs/canaries.md); None: none.
    canary: Canary | None = None

    def canary_lane(self, pool: Pool) -> Lane:
        """The lane this kind's canaries take (its pool is `pool`)."""
        return (self.canary or Canary()).lane_for(pool.batch is not None)


@dataclass(frozen=True)
class QueueConfig:
    """The kinds and pools an instance routes by; `source` is the file, if any."""

    pools: Mapping[str, Pool]
    kinds: Mapping[str, Kind]
    source: str | None = None

    def kind(self, name: str) -> Kind:
        """The kind called `name`; KeyError when none is declared."""
        return self.kinds[name]

    def pool_of(self, kind: str) -> Pool:
        return self.pools[self.kinds[kind].pool]

    def kinds_of(self, pool: str) -> list[Kind]:
        return [k for k in self.kinds.values() if k.pool == pool]

    @property
    def batch_pools(self) -> list[Pool]:
        """The pools that declare a provider's batch API."""
        return [p for p in self.pools.values() if p.batch is not None]

    @property
    def single(self) -> bool:
        """Today's queue: one kind in one pool (nothing to break down by)."""
        return len(self.kinds) == 1 and len(self.pools) == 1

    @cached_property
    def prices(self) -> dict[str, Price]:
        """Every pool's prices in one table: a result is priced before its pool is read.

        A model priced differently by two pools is refused at start-up (merged()).
        """
        table: dict[str, Price] = {}
        for pool in self.pools.values():
            table |= pool.prices
        return table

    def batch_price(self, pool: str, model: str) -> Price | None:
        """USD per 1M tokens of `model` on `pool`'s batch lane: declared, else a share of live."""
        declared = self.pools[pool].batch_prices.get(model)
        if declared is not None:
            return declared
        live = self.pools[pool].prices.get(model) or self.prices.get(model)
        return None if live is None else (live[0] * BATCH_SHARE, live[1] * BATCH_SHARE)

    @cached_property
    def plan(self) -> str:
        """What the claim needs, as the jsonb the SQL rules read (30_gate.sql, aiqueue_room)."""
        return json.dumps({
            "pools": [{"name": p.name, "cap": p.max_in_flight, "tpm": p.tokens_per_minute,
                       "rpm": p.requests_per_minute, "cache": p.prompt_cache.plan()}
                      for p in self.pools.values()],
            "kinds": [{"name": k.name, "pool": k.pool, "cap": k.max_in_flight}
                      for k in self.kinds.values()],
        }, separators=(",", ":"))

    @cached_property
    def fallbacks(self) -> list[Kind]:
        """The kinds that name a fallback (docs/fallback-budgets-calendar.md)."""
        return [k for k in self.kinds.values() if k.fallback is not None]

    @cached_property
    def attempts(self) -> str:
        """{kind: max_attempts} of the kinds that set their own, as jsonb text."""
        return json.dumps({k.name: k.max_attempts for k in self.kinds.values()
                           if k.max_attempts is not None})


_POOL_FIELDS = frozenset(f.name for f in fields(Pool)) - {"name", "declared"}


def merged(file: QueueConfig | None, default_pool: Pool, default_kind: Kind) -> QueueConfig:
    """The file's kinds and pools beside the default ones the environment builds.

    A `[pools.default]` table changes only the keys it sets (a batch API, say):
    the rest stay as the environment sets them.  Raises SettingsError naming the
    key when the result does not hold together.
    """
    pools = {DEFAULT_POOL: default_pool}
    kinds = {DEFAULT_KIND: default_kind}
    if file is not None:
        for name, pool in file.pools.items():
            pools[name] = pool if name != DEFAULT_POOL else replace(
                default_pool, **{k: getattr(pool, k) for k in pool.declared & _POOL_FIELDS})
        kinds |= dict(file.kinds)
    _check_prices(pools)
    _check_lanes(pools, kinds)
    _check_fallbacks(kinds)
    return QueueConfig(pools, kinds, file.source if file else None)


def _check_prices(pools: Mapping[str, Pool]) -> None:
    seen: dict[str, tuple[str, Price]] = {}
    for pool in pools.values():
        for model, price in pool.prices.items():
            other = seen.setdefault(model, (pool.name, price))
            if other[1] != price:
                raise SettingsError(f"pools.{pool.name}.prices.{model}: the model is priced "
                                    f"differently in pool {other[0]}")


def _check_fallbacks(kinds: Mapping[str, Kind]) -> None:
    """A fallback is another kind, declared, in another pool (a pool that is down
    would take its own kind's rows no better)."""
    for kind in kinds.values():
        if kind.fallback is None:
            continue
        other = kinds.get(kind.fallback)
        if other is None:
            raise SettingsError(f"kinds.{kind.name}.fallback names {kind.fallback!r}, which is "
                                f"no kind (declared: {', '.join(sorted(kinds))})")
        if other.pool == kind.pool:
            raise SettingsError(f"kinds.{kind.name}.fallback names {other.name!r}, which is in "
                                f"the same pool ({kind.pool}); a fallback is in another pool")


def _check_lanes(pools: Mapping[str, Pool], kinds: Mapping[str, Kind]) -> None:
    """A batch-lane kind needs its pool's batch API; the lane posts render and parse by HTTP."""
    for kind in kinds.values():
        pool = pools[kind.pool]
        if kind.lane == "batch" and pool.batch is None:
            raise SettingsError(f"kinds.{kind.name}.lane = \"batch\" needs a batch API, but "
                                f"pools.{pool.name}.batch is not set")
        if kind.canary is not None and kind.canary.lane == "batch" and pool.batch is None:
            raise SettingsError(f"kinds.{kind.name}.canary.lane = \"batch\" needs a batch API, "
                                f"but pools.{pool.name}.batch is not set")
        # The default kind's is AI_MARKING_FUNCTION_URL, which pools.py checks.
        if pool.batch is not None and kind.function_url is None and kind.name != DEFAULT_KIND:
            raise SettingsError(f"kinds.{kind.name}.function_url is required: pool "
                                f"{pool.name}'s batch lane posts the function's render and "
                                "parse modes to it")
