"""Settings of the reference marking function, read once from the environment."""

from __future__ import annotations

import base64
import binascii
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .errors import SettingsError

BackendName = Literal["simulate", "ollama", "openai", "anthropic"]
BACKENDS: tuple[BackendName, ...] = ("simulate", "ollama", "openai", "anthropic")
DEFAULT_MODELS: dict[BackendName, str] = {
    "simulate": "simulator",
    "ollama": "llama3.1:8b",
    "openai": "gpt-4o-mini",
    "anthropic": "claude-haiku-4-5",
}


@dataclass(frozen=True)
class Settings:
    """Everything the function reads from its environment."""

    backend: BackendName = "simulate"
    model: str = "simulator"
    ollama_url: str = "http://127.0.0.1:11434"
    openai_base_url: str = "https://api.openai.com"
    openai_api_key: str | None = None
    anthropic_base_url: str = "https://api.anthropic.com"
    anthropic_api_key: str | None = None
    model_timeout: float = 120.0
    simulate_latency: float = 0.5
    simulate_failure_rate: float = 0.0
    heartbeat_seconds: float = 30.0
    callback_tries: int = 5
    callback_backoff: float = 0.5
    function_token: str | None = None
    # AI_MARKING_SIGNING_SECRET (the app's, `whsec_…`): dispatches must be signed with it.
    signing_secret: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read the settings; raise SettingsError naming the first bad variable."""
        env = os.environ if env is None else env
        backend = env.get("AI_MARK_BACKEND", "simulate").strip().lower() or "simulate"
        if backend not in BACKENDS:
            raise SettingsError(f"AI_MARK_BACKEND must be one of {', '.join(BACKENDS)}")
        name: BackendName = backend
        rate = _number(env, "AI_MARK_SIMULATE_FAILURE_RATE", 0.0)
        if rate > 1:
            raise SettingsError("AI_MARK_SIMULATE_FAILURE_RATE must be between 0 and 1")
        if name == "anthropic" and not _text(env, "ANTHROPIC_API_KEY"):
            raise SettingsError("ANTHROPIC_API_KEY is required with AI_MARK_BACKEND=anthropic")
        tries = _number(env, "AI_MARK_CALLBACK_TRIES", 5.0)
        if tries < 1 or not tries.is_integer():
            raise SettingsError("AI_MARK_CALLBACK_TRIES must be a whole number >= 1")
        return cls(
            backend=name,
            model=_text(env, "AI_MARK_MODEL") or DEFAULT_MODELS[name],
            ollama_url=_url(env, "OLLAMA_URL", "http://127.0.0.1:11434"),
            openai_base_url=_url(env, "OPENAI_BASE_URL", "https://api.openai.com"),
            openai_api_key=_text(env, "OPENAI_API_KEY"),
            anthropic_base_url=_url(env, "ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
            anthropic_api_key=_text(env, "ANTHROPIC_API_KEY"),
            model_timeout=_number(env, "AI_MARK_TIMEOUT_SECONDS", 120.0, positive=True),
            simulate_latency=_number(env, "AI_MARK_SIMULATE_LATENCY", 0.5),
            simulate_failure_rate=rate,
            heartbeat_seconds=_number(env, "AI_MARK_HEARTBEAT_SECONDS", 30.0, positive=True),
            callback_tries=int(tries),
            callback_backoff=_number(env, "AI_MARK_CALLBACK_BACKOFF_SECONDS", 0.5),
            function_token=_text(env, "AI_MARKING_FUNCTION_TOKEN"),
            signing_secret=_signing_secret(env),
        )


# Hosts that only this machine can reach: there the function may run open.
LOCAL_HOSTS = frozenset({"localhost", "::1", "ip6-localhost"})


def is_local_host(host: str) -> bool:
    """A loopback address or name (127.0.0.0/8, ::1, localhost)."""
    host = host.strip().strip("[]").lower()
    return host in LOCAL_HOSTS or host.startswith("127.") or host.endswith(".localhost")


def require_closed(settings: Settings, *, local: bool = False) -> None:
    """Refuse to start an open function (docs/deploying/index.md), except on a local address.

    Without AI_MARKING_FUNCTION_TOKEN or AI_MARKING_SIGNING_SECRET anyone who
    finds the function gets a free model that POSTs wherever they ask.
    """
    if settings.function_token or settings.signing_secret or local:
        return
    raise SettingsError("AI_MARKING_FUNCTION_TOKEN (or AI_MARKING_SIGNING_SECRET) must be set: "
                        "without it anyone who finds the function can use its model")


def _signing_secret(env: Mapping[str, str]) -> str | None:
    """`whsec_` + base64 of 24 to 64 bytes, as the app requires."""
    raw = _text(env, "AI_MARKING_SIGNING_SECRET")
    if raw is None:
        return None
    try:
        key = base64.b64decode(raw.removeprefix("whsec_"), validate=True)
    except binascii.Error:
        key = b""
    if not raw.startswith("whsec_") or not 24 <= len(key) <= 64:
        raise SettingsError(
            "AI_MARKING_SIGNING_SECRET must be whsec_ followed by base64 of 24 to 64 bytes")
    return raw


def _text(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _url(env: Mapping[str, str], name: str, default: str) -> str:
    value = _text(env, name) or default
    if not value.startswith(("http://", "https://")):
        raise SettingsError(f"{name} must be an http:// or https:// URL")
    return value.rstrip("/")


def _number(env: Mapping[str, str], name: str, default: float, *, positive: bool = False) -> float:
    raw = _text(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise SettingsError(f"{name} must be a {'positive' if positive else 'non-negative'} number")
    return value
