"""The values of aiqueue.toml, each checked with an error that names its key."""

from __future__ import annotations

import math
import re
from typing import Any

from aiqueue.errors import SettingsError

NAME = re.compile(r"[a-z0-9_-]{1,32}")


def tables(data: dict[str, Any], section: str) -> dict[str, dict[str, Any]]:
    """The `[section.<name>]` tables, each name checked."""
    found = data.get(section, {})
    if not isinstance(found, dict):
        raise SettingsError(f"{section} must be a table of [{section}.<name>] tables")
    for name, body in found.items():
        if not NAME.fullmatch(name):
            raise SettingsError(f"{section}.{name[:40]!r}: a name is 1-32 of a-z 0-9 _ -")
        if not isinstance(body, dict):
            raise SettingsError(f"{section}.{name} must be a table")
    return found


def check_keys(where: str, body: dict[str, Any], allowed: frozenset[str]) -> None:
    extra = sorted(set(body) - allowed)
    if extra:
        raise SettingsError(f"{where}.{extra[0]} is not a known key "
                            f"(known: {', '.join(sorted(allowed))})")


def whole(where: str, value: object, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise SettingsError(f"{where} must be a whole number >= {minimum}, got {value!r}")
    return value


def usd(where: str, value: object) -> float:
    if (not isinstance(value, (int, float)) or isinstance(value, bool)
            or not math.isfinite(value) or value < 0):
        raise SettingsError(f"{where} must be a number of USD >= 0, got {value!r}")
    return float(value)


def text(where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(f"{where} must be a non-empty string")
    return value.strip()


def url(where: str, value: object) -> str:
    found = text(where, value)
    if not re.fullmatch(r"https?://[^\s]+", found):
        raise SettingsError(f"{where} must be an http(s) URL, got {found!r}")
    return found


# The app's own secrets: a key a function or a provider is sent never names one.
APP_SECRETS = frozenset({
    "MARKING_QUEUE_SECRET", "DATABASE_URL", "DATABASE_DIRECT_URL", "CRON_SECRET",
    "METRICS_TOKEN", "AI_QUEUE_ADMIN_PASSWORD", "AI_MARKING_SIGNING_SECRET",
    "QUEUE_NOTIFY_SECRET", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "VERCEL_OIDC_TOKEN",
})


def env_name(where: str, value: object, *, also: frozenset[str] = frozenset()) -> str:
    """The name of a variable holding a key the app sends; never one of the app's own
    secrets (nor one of `also`)."""
    name = text(where, value)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise SettingsError(f"{where} must name an environment variable, got {name!r}")
    if name.upper() in APP_SECRETS | also:
        raise SettingsError(f"{where} names {name}, one of the app's own secrets: it would be "
                            "sent to others; name a variable of its own")
    return name


def prices(where: str, value: object) -> dict[str, tuple[float, float]]:
    """`{model = [USD per 1M input, per 1M output]}`."""
    if not isinstance(value, dict):
        raise SettingsError(f"{where} must be a table {{model = [input, output]}}")
    found = {}
    for model, pair in value.items():
        if not (isinstance(pair, list) and len(pair) == 2):
            raise SettingsError(f"{where}.{model} must be [USD per 1M input, per 1M output]")
        found[model] = (usd(f"{where}.{model}", pair[0]), usd(f"{where}.{model}", pair[1]))
    return found
