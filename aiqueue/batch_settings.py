"""The overnight lane's settings for the default pool (CONTRACT §9f), read once.

Until the pools file (§9b) names a pool's batch API, the default pool's lane
is set by the environment: QUEUE_BATCH_PROVIDER (`openai` or `anthropic`;
unset: no batch lane), QUEUE_BATCH_BASE_URL, QUEUE_BATCH_KEY_ENV (the name of
the variable holding the key), QUEUE_BATCH_MODEL,
QUEUE_BATCH_FALLBACK_MARGIN_SECONDS (900) and QUEUE_BATCH_PRICE_FACTOR (the
batch price as a share of live, 0.5). These map one to one onto a pool's
`batch`, `batch_base_url`, `batch_key_env`, `batch_model`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from aiqueue.errors import SettingsError

BatchProvider = Literal["openai", "anthropic"]
_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
_KEY_ENVS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@dataclass(frozen=True)
class BatchLaneSettings:
    """One pool's batch API."""

    provider: BatchProvider
    base_url: str
    key_env: str
    model: str
    api_key: str = field(repr=False)
    margin_seconds: float = 900.0
    price_factor: float = 0.5


def load_batch(env: Mapping[str, str]) -> BatchLaneSettings | None:
    """The default pool's lane, or None; raise SettingsError naming a bad variable."""
    provider = env.get("QUEUE_BATCH_PROVIDER", "").strip().lower()
    if not provider:
        return None
    if provider not in _BASE_URLS:
        raise SettingsError("QUEUE_BATCH_PROVIDER must be 'openai' or 'anthropic'")
    base_url = env.get("QUEUE_BATCH_BASE_URL", "").strip() or _BASE_URLS[provider]
    if not base_url.startswith(("http://", "https://")):
        raise SettingsError("QUEUE_BATCH_BASE_URL must be an http(s) URL")
    key_env = env.get("QUEUE_BATCH_KEY_ENV", "").strip() or _KEY_ENVS[provider]
    api_key = env.get(key_env, "").strip()
    if not api_key:
        raise SettingsError(f"{key_env} (named by QUEUE_BATCH_KEY_ENV) must hold the "
                            "provider's API key")
    model = env.get("QUEUE_BATCH_MODEL", "").strip()
    if not model:
        raise SettingsError("QUEUE_BATCH_MODEL is required with QUEUE_BATCH_PROVIDER")
    return BatchLaneSettings(
        provider="openai" if provider == "openai" else "anthropic", base_url=base_url,
        key_env=key_env, model=model, api_key=api_key,
        margin_seconds=_number(env, "QUEUE_BATCH_FALLBACK_MARGIN_SECONDS", 900.0, 0.0),
        price_factor=_number(env, "QUEUE_BATCH_PRICE_FACTOR", 0.5, 0.0, 1.0))


def _number(env: Mapping[str, str], name: str, default: float, low: float,
            high: float = math.inf) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value) or not low <= value <= high:
        raise SettingsError(f"{name} must be between {low:g} and {high:g}")
    return value
