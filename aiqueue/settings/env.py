"""Values read from the environment, each refused with one line that names its variable.

The first step of the settings: table.py and the other readers import these, so a variable
is read and its error worded the same way everywhere. An unset or blank
variable gives the default.

`number`, `optional` and `entry` make a Settings field that names its variable
and reader once: `load_settings` reads every such field in one loop.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from aiqueue.errors import SettingsError

Env = Mapping[str, str]
N = TypeVar("N", int, float)
# DATABASE_PREPARED_STATEMENTS (aiqueue/db/prepared.py).
PreparedStatements = Literal["auto", "on", "off"]
PREPARED_MODES: tuple[PreparedStatements, ...] = ("auto", "on", "off")
T = TypeVar("T")


@dataclass(frozen=True)
class ModelPrice:
    """USD per 1,000,000 tokens of a model (QUEUE_MODEL_PRICES)."""

    input: float
    output: float


def env_int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    """An integer >= `minimum`; unset or empty: `default`."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SettingsError(f"{name} must be >= {minimum}, got {value}")
    return value


def env_float(
    env: Mapping[str, str], name: str, default: float, minimum: float,
    maximum: float = float("inf"),
) -> float:
    """A finite number between `minimum` and `maximum`; unset or empty: `default`."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None
    if not minimum <= value <= maximum or value == float("inf"):
        bound = f"between {minimum} and {maximum}" if maximum < float("inf") else f">= {minimum}"
        raise SettingsError(f"{name} must be a finite number {bound}, got {raw}")
    return value


def env_usd(env: Mapping[str, str], name: str) -> float | None:
    """An optional amount of USD (a spend cap); unset: None."""
    if not env.get(name, "").strip():
        return None
    return env_float(env, name, 0.0, 0.0)


def env_text(env: Mapping[str, str], name: str) -> str | None:
    """A value taken as it is (a token), or None."""
    return env.get(name, "").strip() or None


def env_prepared(env: Mapping[str, str], name: str) -> PreparedStatements:
    """auto, on or off; default auto (on for a direct connection, off behind a pooler)"""
    value = env.get(name, "").strip().lower() or "auto"
    for mode in PREPARED_MODES:
        if value == mode:
            return mode
    raise SettingsError(f"{name} must be auto, on or off, got {value[:20]!r}")


def env_url(env: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """An http(s) URL."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.startswith(("http://", "https://")):
        raise SettingsError(f"{name} must be an http(s) URL, got {raw!r}")
    return raw


def env_db_url(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    """A postgresql:// URL."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.startswith(("postgres://", "postgresql://")):
        raise SettingsError(f"{name} must be a postgresql:// URL")
    return raw


def env_whsec(env: Mapping[str, str], name: str) -> str | None:
    """A Standard Webhooks secret: `whsec_` + base64 of 24 to 64 random bytes (padding optional)."""
    raw = env.get(name, "").strip()
    if not raw:
        return None
    problem = f"{name} must be 'whsec_' followed by base64 of 24 to 64 random bytes"
    if not raw.startswith("whsec_"):
        raise SettingsError(problem)
    encoded = raw.removeprefix("whsec_")
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise SettingsError(problem) from None
    if not 24 <= len(key) <= 64:
        raise SettingsError(problem)
    return raw


def env_prices(env: Mapping[str, str], name: str) -> dict[str, ModelPrice]:
    """Prices by model: {"<model>": {"input": usd_per_1m, "output": usd_per_1m}}."""
    raw = env.get(name, "").strip()
    if not raw:
        return {}
    problem = "must be a JSON object {\"<model>\": {\"input\": <USD per 1M tokens>, " \
              "\"output\": <USD per 1M tokens>}}"
    try:
        data = json.loads(raw)
    except ValueError:
        raise SettingsError(f"{name} is not valid JSON; it {problem}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{name} {problem}")
    prices = {}
    for model, price in data.items():
        ok = isinstance(price, dict) and set(price) == {"input", "output"} and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and v >= 0 for v in price.values())
        if not ok or not model:
            raise SettingsError(f"{name}[{model[:60]!r}] {problem}")
        prices[model] = ModelPrice(float(price["input"]), float(price["output"]))
    return prices


def number(name: str, default: N, low: N, high: float = float("inf"), *,
            on_vercel: N | None = None, cap: N | None = None) -> N:
    """A field read from the variable `name`: an int or a float as its default, low..high.

    `on_vercel` is the default on Vercel; `cap` lowers a larger value to itself.
    """
    def read(env: Env) -> N:
        fallback = on_vercel if on_vercel is not None and env.get("VERCEL") else default
        if isinstance(default, int):
            value: N = env_int(env, name, int(fallback), int(low))
        else:
            value = env_float(env, name, fallback, low, high)
        return value if cap is None else min(value, cap)
    kind = "an integer" if isinstance(default, int) else "a number"
    check = f"{kind} >= {low}" if high == float("inf") else f"{kind} from {low} to {high:g}"
    if on_vercel is not None:
        check += f"; {on_vercel} on Vercel"
    if cap is not None:
        check += f"; a larger value counts as {cap}"
    return field(default=default, metadata={"env": name, "read": read, "check": check})


def optional(name: str, read: Callable[[Env, str], T | None], *, secret: bool = False) -> T | None:
    """A field read from the variable `name` by `read`; unset: None."""
    return field(default=None, repr=not secret, metadata=entry(name, read))


def entry(name: str, read: Callable[[Env, str], object]) -> dict[str, object]:
    """A table entry's metadata: the variable and how to read it."""
    check = (read.__doc__ or "").strip().splitlines()[0] if read.__doc__ else ""
    return {"env": name, "read": lambda env: read(env, name), "check": check}
