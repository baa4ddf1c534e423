"""The kinds' and pools' settings, checked against the rest (docs/concepts.md, docs/overnight.md).

aiqueue.toml agrees with QUEUE_MODEL_PRICES and the function mode, a pool with
a spend cap has a price to charge, and the default pool's batch lane
(`[pools.default] batch`) can reach the function.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiqueue.errors import SettingsError
from aiqueue.settings import toml_load
from aiqueue.settings.env import Env, ModelPrice
from aiqueue.settings.kinds import DEFAULT_KIND, DEFAULT_POOL, Kind, Pool, QueueConfig, merged
from aiqueue.settings.targets import DispatchTarget


def batch_reaches_function(file: QueueConfig | None, target: DispatchTarget,
                           function_url: str | None) -> None:
    """The default pool's batch lane posts the function's render and parse modes by HTTP:
    with a DigitalOcean or Lambda target it needs AI_MARKING_FUNCTION_URL."""
    if file is None or function_url is not None or target == "http":
        return
    if any(p.name == DEFAULT_POOL for p in file.batch_pools):
        raise SettingsError("AI_MARKING_FUNCTION_URL (the function's web action or function "
                            "URL) is required for the batch lane with AI_MARKING_DISPATCH="
                            f"{target}")


def caps_priced(queue: QueueConfig) -> None:
    """A spend cap (docs/concepts.md) charges each dispatch at its pool's prices: a pool with a
    cap and no price known at all refuses start-up, naming the price setting."""
    caps = {"group_usd_per_hour": "QUEUE_GROUP_USD_PER_HOUR",
            "group_usd_per_day": "QUEUE_GROUP_USD_PER_DAY", "pool_usd_per_day": "QUEUE_USD_PER_DAY"}
    for pool in queue.pools.values():
        named = [key for key in caps if getattr(pool, key) is not None]
        if not named or pool.prices:
            continue
        if pool.name == DEFAULT_POOL:
            raise SettingsError(
                f"QUEUE_MODEL_PRICES names no price, but {' and '.join(caps[k] for k in named)} "
                "sets a spend cap: a cap needs a price to charge dispatches against")
        raise SettingsError(
            f"pools.{pool.name}.prices names no price, but pools.{pool.name}.{named[0]} sets a "
            "spend cap: a cap needs a price to charge dispatches against")


def queue_file(env: Env, mode: str, local_run: bool,
               prices: Mapping[str, ModelPrice]) -> QueueConfig | None:
    """aiqueue.toml (AIQUEUE_CONFIG), validated; sync mode reaches only http kinds.

    `prices` are QUEUE_MODEL_PRICES: the file's prices for a model must agree with them.
    """
    file = toml_load.load_file(env, toml_load.config_path(env), local_run=local_run)
    if file is not None:
        merged(file, Pool(DEFAULT_POOL, 0, prices={
            m: (p.input, p.output) for m, p in prices.items()}),
            Kind(DEFAULT_KIND, DEFAULT_POOL))
    if file is not None and mode == "sync":
        for kind in file.kinds.values():
            if kind.dispatch != "http":
                raise SettingsError(f"kinds.{kind.name}.dispatch = \"{kind.dispatch}\" does not "
                                    "work with AI_MARKING_FUNCTION_MODE=sync")
    return file
