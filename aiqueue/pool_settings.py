"""The kinds' and pools' settings, checked against the rest (CONTRACT §9b, §9c, §9f).

aiqueue.toml agrees with QUEUE_MODEL_PRICES and the function mode, a pool with
a spend cap has a price to charge, and the default pool's batch lane
(QUEUE_BATCH_*, aiqueue/batch_settings.py) can reach the function.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiqueue import config
from aiqueue.batch_settings import BatchLaneSettings, load_batch
from aiqueue.env_values import Env, ModelPrice
from aiqueue.errors import SettingsError
from aiqueue.setup_settings import secure_url
from aiqueue.target_settings import DispatchTarget


def batch_lane(env: Env, target: DispatchTarget, function_url: str | None,
               local_run: bool) -> BatchLaneSettings | None:
    """The default pool's batch lane (QUEUE_BATCH_*, aiqueue/batch_settings.py), or None."""
    batch_lane = load_batch(env)
    if batch_lane is None:
        return None
    # The provider sees the students' answers: https outside dev, as for the function.
    secure_url(env, "QUEUE_BATCH_BASE_URL", local_run)
    if function_url is None and target != "http":
        # The lane calls the function's render and parse modes synchronously, by HTTP.
        raise SettingsError("AI_MARKING_FUNCTION_URL (the function's web action or function "
                            "URL) is required for the batch lane with AI_MARKING_DISPATCH="
                            f"{target}")
    return batch_lane


def caps_priced(queue: config.QueueConfig) -> None:
    """A spend cap (CONTRACT §9c) charges each dispatch at its pool's prices: a pool with a
    cap and no price known at all refuses start-up, naming the price setting."""
    caps = {"group_usd_per_hour": "QUEUE_GROUP_USD_PER_HOUR",
            "group_usd_per_day": "QUEUE_GROUP_USD_PER_DAY", "pool_usd_per_day": "QUEUE_USD_PER_DAY"}
    for pool in queue.pools.values():
        named = [key for key in caps if getattr(pool, key) is not None]
        if not named or pool.prices:
            continue
        if pool.name == config.DEFAULT_POOL:
            raise SettingsError(
                f"QUEUE_MODEL_PRICES names no price, but {' and '.join(caps[k] for k in named)} "
                "sets a spend cap: a cap needs a price to charge dispatches against")
        raise SettingsError(
            f"pools.{pool.name}.prices names no price, but pools.{pool.name}.{named[0]} sets a "
            "spend cap: a cap needs a price to charge dispatches against")


def queue_file(env: Env, mode: str, local_run: bool,
               prices: Mapping[str, ModelPrice]) -> config.QueueConfig | None:
    """aiqueue.toml (AIQUEUE_CONFIG), validated; sync mode reaches only http kinds.

    `prices` are QUEUE_MODEL_PRICES: the file's prices for a model must agree with them.
    """
    file = config.load_file(env, config.config_path(env), local_run=local_run)
    if file is not None:
        config.merged(file, config.Pool(config.DEFAULT_POOL, 0, prices={
            m: (p.input, p.output) for m, p in prices.items()}),
            config.Kind(config.DEFAULT_KIND, config.DEFAULT_POOL))
    if file is not None and mode == "sync":
        for kind in file.kinds.values():
            if kind.dispatch != "http":
                raise SettingsError(f"kinds.{kind.name}.dispatch = \"{kind.dispatch}\" does not "
                                    "work with AI_MARKING_FUNCTION_MODE=sync")
    return file
