"""aiqueue.toml: task kinds and model pools (CONTRACT §9b), read once at start-up.

A *kind* names what a row asks for and which function does it; a *pool* is
one model key with its own limits (the cap for the learned limit L, declared
budgets, prices, spend caps).  Every kind belongs to one pool.  The file holds
no secrets, only the names of the variables that hold them (`token_env`,
`batch_key_env`); a missing variable stops start-up like a bad setting.

Without a file there is one kind, `mark`, in one pool, `default`, both built
from the environment (aiqueue/settings.py `Settings.queue`): the file adds
kinds and pools beside them, and may redeclare either to change it.

Keys accepted here but enforced elsewhere (or later): the spend caps
(`group_usd_per_hour`, `group_usd_per_day`, `pool_usd_per_day`, §9c), the
batch lane (`batch`, `batch_base_url`, `batch_key_env`, `batch_model`, a
kind's `lane`, §9f).  They are parsed and validated here so that the file's
format is settled in one place.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from aiqueue import paths
from aiqueue.errors import SettingsError
from aiqueue.setup_settings import require_https
from aiqueue.target_settings import (
    TARGETS,
    DispatchTarget,
    DoTarget,
    LambdaTarget,
    load_digitalocean,
    load_lambda,
)

DEFAULT_KIND = "mark"
DEFAULT_POOL = "default"
NAME = re.compile(r"[a-z0-9_-]{1,32}")
Lane = Literal["live", "batch"]
BatchProvider = Literal["openai", "anthropic"]

_POOL_KEYS = frozenset({
    "max_in_flight", "tokens_per_minute", "requests_per_minute", "prices",
    "group_usd_per_hour", "group_usd_per_day", "pool_usd_per_day",
    "batch", "batch_base_url", "batch_key_env", "batch_model",
})
_KIND_KEYS = frozenset({
    "pool", "dispatch", "function_url", "do_namespace", "do_action", "lambda_function",
    "token_env", "max_in_flight", "max_attempts", "lane",
})


@dataclass(frozen=True)
class Pool:
    """One model key and its limits."""

    name: str
    # The cap for L (0 = unlimited until the model first refuses).
    max_in_flight: int
    tokens_per_minute: int = 0
    requests_per_minute: int = 0
    # USD per 1M input / output tokens, per model.
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict, hash=False)
    # Spend caps (§9c), in USD; None = none.
    group_usd_per_hour: float | None = None
    group_usd_per_day: float | None = None
    pool_usd_per_day: float | None = None
    # The overnight lane (§9f): the provider's batch API; None = live only.
    batch: BatchProvider | None = None
    batch_base_url: str | None = None
    batch_key_env: str | None = None
    batch_model: str | None = None

    @property
    def budget_declared(self) -> bool:
        return self.tokens_per_minute > 0 or self.requests_per_minute > 0


@dataclass(frozen=True)
class Kind:
    """What a row asks for: the function that does it, its token, its cap and attempts."""

    name: str
    pool: str
    dispatch: DispatchTarget = "http"
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
    lane: Lane = "live"


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
    def single(self) -> bool:
        """Today's queue: one kind in one pool (nothing to break down by)."""
        return len(self.kinds) == 1 and len(self.pools) == 1

    @cached_property
    def prices(self) -> dict[str, tuple[float, float]]:
        """Every pool's prices in one table: a result is priced before its pool is read.

        A model priced differently by two pools is refused at start-up (merged()).
        """
        table: dict[str, tuple[float, float]] = {}
        for pool in self.pools.values():
            table |= pool.prices
        return table

    @cached_property
    def plan(self) -> str:
        """What the claim needs, as the jsonb of functions.sql (aiqueue_room)."""
        return json.dumps({
            "pools": [{"name": p.name, "cap": p.max_in_flight, "tpm": p.tokens_per_minute,
                       "rpm": p.requests_per_minute} for p in self.pools.values()],
            "kinds": [{"name": k.name, "pool": k.pool, "cap": k.max_in_flight}
                      for k in self.kinds.values()],
        }, separators=(",", ":"))

    @cached_property
    def stalled_plan(self) -> str:
        """The plan with every pool's cap at 1: "a row is due and none of its pool is out"."""
        data = json.loads(self.plan)
        for pool in data["pools"]:
            pool["cap"] = 1
        return json.dumps(data, separators=(",", ":"))

    @cached_property
    def attempts(self) -> str:
        """{kind: max_attempts} of the kinds that set their own, as jsonb text."""
        return json.dumps({k.name: k.max_attempts for k in self.kinds.values()
                           if k.max_attempts is not None})


def merged(file: QueueConfig | None, default_pool: Pool, default_kind: Kind) -> QueueConfig:
    """The file's kinds and pools beside the default ones the environment builds."""
    pools = {DEFAULT_POOL: default_pool}
    kinds = {DEFAULT_KIND: default_kind}
    if file is not None:
        pools |= dict(file.pools)
        kinds |= dict(file.kinds)
    seen: dict[str, tuple[str, tuple[float, float]]] = {}
    for pool in pools.values():
        for model, price in pool.prices.items():
            other = seen.setdefault(model, (pool.name, price))
            if other[1] != price:
                raise SettingsError(f"pools.{pool.name}.prices.{model}: the model is priced "
                                    f"differently in pool {other[0]}")
    return QueueConfig(pools, kinds, file.source if file else None)


# -- reading the file ------------------------------------------------------------


def config_path(env: Mapping[str, str], root: Path | None = None) -> Path | None:
    """AIQUEUE_CONFIG (it must exist), else aiqueue.toml at the app's root if it exists.

    The app's root is the checkout's top (paths.ROOT, beside templates/ and
    migrations/), which Vercel bundles with every function.
    """
    raw = env.get("AIQUEUE_CONFIG", "").strip()
    if raw:
        path = Path(raw)
        if not path.is_file():
            raise SettingsError(f"AIQUEUE_CONFIG: no such file: {raw}")
        return path
    default = (root or paths.ROOT) / "aiqueue.toml"
    return default if default.is_file() else None


def load_file(env: Mapping[str, str], path: Path | None, *,
              local_run: bool = False) -> QueueConfig | None:
    """The kinds and pools `path` declares, validated; None without a file.

    Raises SettingsError naming the key (`pools.openai.max_in_flight`) or the
    missing variable.  Outside `local_run` (`dev`, `vercel dev`) a kind's function
    URL must be https:// unless it is a local address (CONTRACT §9a).
    """
    if path is None:
        return None
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path}: cannot be read ({type(exc).__name__})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path} is not valid TOML: {exc}") from None
    unknown = set(data) - {"pools", "kinds"}
    if unknown:
        raise SettingsError(f"{path}: unknown table {sorted(unknown)[0]!r} "
                            "(expected [pools.<name>] and [kinds.<name>])")
    pools = {name: _pool(name, body) for name, body in _tables(data, "pools").items()}
    known_pools = set(pools) | {DEFAULT_POOL}
    kinds = {name: _kind(name, body, env, known_pools, local_run)
             for name, body in _tables(data, "kinds").items()}
    for pool in pools.values():
        if pool.batch_key_env and not env.get(pool.batch_key_env, "").strip():
            raise SettingsError(f"pools.{pool.name}.batch_key_env names "
                                f"{pool.batch_key_env}, which is not set")
    return QueueConfig(pools, kinds, str(path))


def _tables(data: dict[str, Any], section: str) -> dict[str, dict[str, Any]]:
    tables = data.get(section, {})
    if not isinstance(tables, dict):
        raise SettingsError(f"{section} must be a table of [{section}.<name>] tables")
    for name, body in tables.items():
        if not NAME.fullmatch(name):
            raise SettingsError(f"{section}.{name[:40]!r}: a name is 1-32 of a-z 0-9 _ -")
        if not isinstance(body, dict):
            raise SettingsError(f"{section}.{name} must be a table")
    return tables


def _check_keys(where: str, body: dict[str, Any], allowed: frozenset[str]) -> None:
    extra = sorted(set(body) - allowed)
    if extra:
        raise SettingsError(f"{where}.{extra[0]} is not a known key "
                            f"(known: {', '.join(sorted(allowed))})")


def _int(where: str, value: object, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise SettingsError(f"{where} must be a whole number >= {minimum}, got {value!r}")
    return value


def _usd(where: str, value: object) -> float:
    if (not isinstance(value, (int, float)) or isinstance(value, bool)
            or not math.isfinite(value) or value < 0):
        raise SettingsError(f"{where} must be a number of USD >= 0, got {value!r}")
    return float(value)


def _text(where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(f"{where} must be a non-empty string")
    return value.strip()


def _url(where: str, value: object) -> str:
    url = _text(where, value)
    if not re.fullmatch(r"https?://[^\s]+", url):
        raise SettingsError(f"{where} must be an http(s) URL, got {url!r}")
    return url


def _env_name(where: str, value: object) -> str:
    name = _text(where, value)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise SettingsError(f"{where} must name an environment variable, got {name!r}")
    return name


def _prices(where: str, value: object) -> dict[str, tuple[float, float]]:
    if not isinstance(value, dict):
        raise SettingsError(f"{where} must be a table {{model = [input, output]}}")
    prices = {}
    for model, pair in value.items():
        if not (isinstance(pair, list) and len(pair) == 2):
            raise SettingsError(f"{where}.{model} must be [USD per 1M input, per 1M output]")
        prices[model] = (_usd(f"{where}.{model}", pair[0]), _usd(f"{where}.{model}", pair[1]))
    return prices


def _pool(name: str, body: dict[str, Any]) -> Pool:
    where = f"pools.{name}"
    _check_keys(where, body, _POOL_KEYS)
    if "max_in_flight" not in body:
        raise SettingsError(f"{where}.max_in_flight is required (the cap for L; 0 = unlimited)")
    caps = {key: _usd(f"{where}.{key}", body[key]) for key in
            ("group_usd_per_hour", "group_usd_per_day", "pool_usd_per_day") if key in body}
    batch = body.get("batch")
    if batch is not None and batch not in ("openai", "anthropic"):
        raise SettingsError(f"{where}.batch must be \"openai\" or \"anthropic\", got {batch!r}")
    if batch is not None and "batch_key_env" not in body:
        raise SettingsError(f"{where}.batch_key_env is required with {where}.batch")
    return Pool(
        name=name,
        max_in_flight=_int(f"{where}.max_in_flight", body["max_in_flight"], 0),
        tokens_per_minute=_int(f"{where}.tokens_per_minute", body.get("tokens_per_minute", 0), 0),
        requests_per_minute=_int(f"{where}.requests_per_minute",
                                 body.get("requests_per_minute", 0), 0),
        prices=_prices(f"{where}.prices", body.get("prices", {})),
        batch=batch,
        batch_base_url=_url(f"{where}.batch_base_url", body["batch_base_url"])
        if "batch_base_url" in body else None,
        batch_key_env=_env_name(f"{where}.batch_key_env", body["batch_key_env"])
        if "batch_key_env" in body else None,
        batch_model=_text(f"{where}.batch_model", body["batch_model"])
        if "batch_model" in body else None,
        **caps,
    )


def _kind(name: str, body: dict[str, Any], env: Mapping[str, str], pools: set[str],
          local_run: bool) -> Kind:
    where = f"kinds.{name}"
    _check_keys(where, body, _KIND_KEYS)
    pool = _text(f"{where}.pool", body.get("pool", DEFAULT_POOL))
    if pool not in pools:
        raise SettingsError(f"{where}.pool names {pool!r}, which is no pool "
                            f"(declared: {', '.join(sorted(pools))})")
    dispatch = body.get("dispatch", "http")
    target = next((t for t in TARGETS if t == dispatch), None)
    if target is None:
        raise SettingsError(f"{where}.dispatch must be http, digitalocean or lambda, "
                            f"got {dispatch!r}")
    token_env = _env_name(f"{where}.token_env", body["token_env"]) if "token_env" in body else None
    token = None
    if token_env is not None:
        token = env.get(token_env, "").strip()
        if not token:
            raise SettingsError(f"{where}.token_env names {token_env}, which is not set")
    lane = body.get("lane", "live")
    if lane not in ("live", "batch"):
        raise SettingsError(f"{where}.lane must be \"live\" or \"batch\", got {lane!r}")
    kind = Kind(
        name=name, pool=pool, dispatch=target, token_env=token_env, lane=lane,
        max_in_flight=_int(f"{where}.max_in_flight", body.get("max_in_flight", 0), 0),
        max_attempts=_int(f"{where}.max_attempts", body["max_attempts"], 1)
        if "max_attempts" in body else None,
    )
    return _with_target(kind, where, body, env, token, local_run)


def _with_target(kind: Kind, where: str, body: dict[str, Any], env: Mapping[str, str],
                 token: str | None, local_run: bool) -> Kind:
    """The kind's function, checked as AI_MARKING_DISPATCH's targets are (target_settings)."""
    needs = {"http": "function_url", "digitalocean": "do_action", "lambda": "lambda_function"}
    key = needs[kind.dispatch]
    if key not in body:
        raise SettingsError(f"{where}.{key} is required with dispatch = \"{kind.dispatch}\"")
    if kind.dispatch == "http":
        url = _url(f"{where}.function_url", body["function_url"])
        require_https(f"{where}.function_url", url, local_run=local_run)
        return replace(kind, function_url=url, function_token=token)
    overlay = dict(env)
    try:
        if kind.dispatch == "digitalocean":
            # The namespace's access key comes from the variable token_env names
            # (else DO_FUNCTIONS_AUTH); the API host is the deployment's.
            overlay["DO_FUNCTIONS_ACTION"] = _text(f"{where}.do_action", body["do_action"])
            if "do_namespace" in body:
                overlay["DO_FUNCTIONS_NAMESPACE"] = _text(f"{where}.do_namespace",
                                                          body["do_namespace"])
            if token is not None:
                overlay["DO_FUNCTIONS_AUTH"] = token
            return replace(kind, digitalocean=load_digitalocean(overlay, local_run=local_run))
        overlay["AI_MARKING_LAMBDA_FUNCTION"] = _text(f"{where}.lambda_function",
                                                      body["lambda_function"])
        return replace(kind, aws_lambda=load_lambda(overlay))
    except SettingsError as exc:
        raise SettingsError(f"{where}: {exc}") from None

