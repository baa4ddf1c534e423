"""Reading aiqueue.toml: AIQUEUE_CONFIG, else aiqueue.toml at the app's root, validated.

The file holds no secrets, only the names of the variables that hold them
(`token_env`, `batch_key_env`); a missing variable stops start-up like a bad
setting, with an error that names the key.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from aiqueue import paths
from aiqueue.answers import DEFAULT_SAME_ANSWERS, KIND_SAME_ANSWERS
from aiqueue.errors import SettingsError
from aiqueue.settings import canary, prompt_cache
from aiqueue.settings.calendar import check_zone
from aiqueue.settings.kinds import DEFAULT_POOL, BatchProvider, Kind, Pool, QueueConfig
from aiqueue.settings.safety import require_https
from aiqueue.settings.targets import TARGETS, load_digitalocean, load_lambda
from aiqueue.settings.toml_values import (
    check_keys,
    env_name,
    prices,
    tables,
    text,
    url,
    usd,
    whole,
)

POOL_KEYS = frozenset({
    "max_in_flight", "tokens_per_minute", "requests_per_minute", "prices",
    "group_usd_per_hour", "group_usd_per_day", "pool_usd_per_day",
    "batch", "batch_base_url", "batch_key_env", "batch_model", "batch_prices", "prompt_cache",
    "timezone",
})
KIND_KEYS = frozenset({
    "pool", "dispatch", "function_url", "do_namespace", "do_action", "lambda_function",
    "token_env", "max_in_flight", "max_attempts", "lane", "same_answers", "fallback",
    "fallback_after_seconds", "expected_seconds", "canary",
})
# Where each provider's batch API is, unless batch_base_url says otherwise.
_BATCH_URLS: dict[BatchProvider, str] = {"openai": "https://api.openai.com/v1",
                                         "anthropic": "https://api.anthropic.com"}


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
    URL must be https:// unless it is a local address (docs/deploying/index.md).
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
    pools = {name: _pool(name, body, env, local_run)
             for name, body in tables(data, "pools").items()}
    known_pools = set(pools) | {DEFAULT_POOL}
    kinds = {name: _kind(name, body, env, known_pools, local_run)
             for name, body in tables(data, "kinds").items()}
    return QueueConfig(pools, kinds, str(path))


def _pool(name: str, body: dict[str, Any], env: Mapping[str, str], local_run: bool) -> Pool:
    where = f"pools.{name}"
    check_keys(where, body, POOL_KEYS)
    # `[pools.default]` changes the keys it sets; the rest are the environment's.
    if "max_in_flight" not in body and name != DEFAULT_POOL:
        raise SettingsError(f"{where}.max_in_flight is required (the cap for L; 0 = unlimited)")
    found: dict[str, Any] = {
        key: usd(f"{where}.{key}", body[key]) for key in
        ("group_usd_per_hour", "group_usd_per_day", "pool_usd_per_day") if key in body}
    for key in ("max_in_flight", "tokens_per_minute", "requests_per_minute"):
        if key in body:
            found[key] = whole(f"{where}.{key}", body[key], 0)
    if "prices" in body:
        found["prices"] = prices(f"{where}.prices", body["prices"])
    if "timezone" in body:
        found["timezone"] = check_zone(body["timezone"], f"{where}.timezone")
    found |= _batch(where, body, env, local_run)
    if "prompt_cache" in body:
        found["prompt_cache"] = prompt_cache.load(f"{where}.prompt_cache", body["prompt_cache"])
    return Pool(name=name, **{"max_in_flight": 0, **found}, declared=frozenset(found))


def _batch(where: str, body: dict[str, Any], env: Mapping[str, str], local_run: bool
           ) -> dict[str, Any]:
    """A pool's batch API: provider, URL, the key's variable (it must be set), model."""
    batch = body.get("batch")
    if batch is None:
        given = sorted(k for k in body if k.startswith("batch_"))
        if given:
            raise SettingsError(f"{where}.{given[0]} needs {where}.batch "
                                "(\"openai\" or \"anthropic\")")
        return {}
    provider = next((p for p in _BATCH_URLS if p == batch), None)
    if provider is None:
        raise SettingsError(f"{where}.batch must be \"openai\" or \"anthropic\", got {batch!r}")
    for key in ("batch_key_env", "batch_model"):
        if key not in body:
            raise SettingsError(f"{where}.{key} is required with {where}.batch")
    base = url(f"{where}.batch_base_url", body.get("batch_base_url", _BATCH_URLS[provider]))
    # The provider sees the students' answers: https outside dev, as for a function.
    require_https(f"{where}.batch_base_url", base, local_run=local_run)
    key_env = env_name(f"{where}.batch_key_env", body["batch_key_env"],
                       also=frozenset({"DO_FUNCTIONS_AUTH", "AI_MARKING_FUNCTION_TOKEN"}))
    key = env.get(key_env, "").strip()
    if not key:
        raise SettingsError(f"{where}.batch_key_env names {key_env}, which is not set")
    return {"batch": provider, "batch_base_url": base, "batch_key_env": key_env,
            "batch_api_key": key, "batch_model": text(f"{where}.batch_model", body["batch_model"]),
            "batch_prices": prices(f"{where}.batch_prices", body.get("batch_prices", {}))}


def _kind(name: str, body: dict[str, Any], env: Mapping[str, str], pools: set[str],
          local_run: bool) -> Kind:
    where = f"kinds.{name}"
    check_keys(where, body, KIND_KEYS)
    pool = text(f"{where}.pool", body.get("pool", DEFAULT_POOL))
    if pool not in pools:
        raise SettingsError(f"{where}.pool names {pool!r}, which is no pool "
                            f"(declared: {', '.join(sorted(pools))})")
    dispatch = body.get("dispatch", "http")
    target = next((t for t in TARGETS if t == dispatch), None)
    if target is None:
        raise SettingsError(f"{where}.dispatch must be http, digitalocean or lambda, "
                            f"got {dispatch!r}")
    # The namespace's own key is a DigitalOcean kind's alone (it is never a bearer).
    app_keys = frozenset() if target == "digitalocean" else frozenset({"DO_FUNCTIONS_AUTH"})
    token_env = env_name(f"{where}.token_env", body["token_env"], also=app_keys) \
        if "token_env" in body else None
    token = None
    if token_env is not None:
        token = env.get(token_env, "").strip()
        if not token:
            raise SettingsError(f"{where}.token_env names {token_env}, which is not set")
    lane = body.get("lane", "live")
    if lane not in ("live", "batch"):
        raise SettingsError(f"{where}.lane must be \"live\" or \"batch\", got {lane!r}")
    same = body.get("same_answers", DEFAULT_SAME_ANSWERS)
    if same not in KIND_SAME_ANSWERS:
        raise SettingsError(f"{where}.same_answers must be \"mark_once\", \"loose\" or "
                            f"\"off\", got {same!r}")
    kind = Kind(
        name=name, pool=pool, dispatch=target, token_env=token_env, lane=lane,
        same_answers=same,
        max_in_flight=whole(f"{where}.max_in_flight", body.get("max_in_flight", 0), 0),
        max_attempts=whole(f"{where}.max_attempts", body["max_attempts"], 1)
        if "max_attempts" in body else None,
        fallback=text(f"{where}.fallback", body["fallback"]) if "fallback" in body else None,
        fallback_after_seconds=seconds(f"{where}.fallback_after_seconds",
                                       body.get("fallback_after_seconds", 120)),
        canary=canary.load(f"{where}.canary", body["canary"]) if "canary" in body else None,
        expected_seconds=_expected(where, body.get("expected_seconds")),
    )
    if "fallback_after_seconds" in body and kind.fallback is None:
        raise SettingsError(f"{where}.fallback_after_seconds needs {where}.fallback")
    return _with_target(kind, where, body, env, token, local_run)


def _expected(where: str, value: object) -> float | None:
    """expected_seconds: absent, or a number of seconds above 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 86400:
        raise SettingsError(f"{where}.expected_seconds must be a number of seconds above 0 "
                            "and under a day")
    return float(value)


def seconds(where: str, value: object) -> float:
    """A whole or decimal number of seconds, 0 or more."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 \
            or value == float("inf"):
        raise SettingsError(f"{where} must be a number of seconds, 0 or more")
    return float(value)


def _with_target(kind: Kind, where: str, body: dict[str, Any], env: Mapping[str, str],
                 token: str | None, local_run: bool) -> Kind:
    """The kind's function, checked as AI_MARKING_DISPATCH's targets are (targets.py).

    A DigitalOcean or Lambda kind may name a `function_url` too: its web URL, which
    a batch lane's render and parse modes are posted to.
    """
    needs = {"http": "function_url", "digitalocean": "do_action", "lambda": "lambda_function"}
    key = needs[kind.dispatch]
    if key not in body:
        raise SettingsError(f"{where}.{key} is required with dispatch = \"{kind.dispatch}\"")
    if "function_url" in body:
        found = url(f"{where}.function_url", body["function_url"])
        require_https(f"{where}.function_url", found, local_run=local_run)
        # A DigitalOcean kind's token is its namespace's key, which runs any action of
        # the namespace: its web URL gets AI_MARKING_FUNCTION_TOKEN (table.py), never it.
        kind = replace(kind, function_url=found,
                       function_token=None if kind.dispatch == "digitalocean" else token)
    if kind.dispatch == "http":
        return kind
    overlay = dict(env)
    try:
        if kind.dispatch == "digitalocean":
            # The namespace's access key comes from the variable token_env names
            # (else DO_FUNCTIONS_AUTH); the API host is the deployment's.
            overlay["DO_FUNCTIONS_ACTION"] = text(f"{where}.do_action", body["do_action"])
            if "do_namespace" in body:
                overlay["DO_FUNCTIONS_NAMESPACE"] = text(f"{where}.do_namespace",
                                                         body["do_namespace"])
            if token is not None:
                overlay["DO_FUNCTIONS_AUTH"] = token
            return replace(kind, digitalocean=load_digitalocean(overlay, local_run=local_run))
        overlay["AI_MARKING_LAMBDA_FUNCTION"] = text(f"{where}.lambda_function",
                                                     body["lambda_function"])
        return replace(kind, aws_lambda=load_lambda(overlay, local_run=local_run))
    except SettingsError as exc:
        raise SettingsError(f"{where}: {exc}") from None
