"""Settings read once from the environment into a frozen object."""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from aiqueue.errors import SettingsError
from aiqueue.target_settings import DispatchTarget, DoTarget, LambdaTarget, load_target

FunctionMode = Literal["async", "sync"]


@dataclass(frozen=True)
class ModelPrice:
    """USD per 1,000,000 tokens of a model (QUEUE_MODEL_PRICES)."""

    input: float
    output: float


@dataclass(frozen=True)
class Settings:
    """Everything aiqueue reads from its environment (see CONTRACT.md §2)."""

    database_url: str | None = None
    database_direct_url: str | None = None
    # The most connections one instance opens (DATABASE_POOL_MAX).
    database_pool_max: int = 4
    # MARKING_QUEUE_SECRET and CRON_SECRET: several values, newest first (rotation).
    queue_secrets: tuple[str, ...] = ()
    cron_secrets: tuple[str, ...] = ()
    admin_password: str = ""
    app_base_url: str = "http://127.0.0.1:8000"
    function_url: str = "http://127.0.0.1:8001/"
    function_token: str | None = None
    function_mode: FunctionMode = "async"
    # AI_MARKING_DISPATCH and its target's settings (aiqueue/target_settings.py).
    dispatch_target: DispatchTarget = "http"
    digitalocean: DoTarget | None = None
    aws_lambda: LambdaTarget | None = None
    callback_url: str = "http://127.0.0.1:8000/webhooks/ai-mark"
    max_attempts: int = 3
    max_in_flight: int = 1
    stuck_after_seconds: float = 600.0
    prune_after_days: float = 7.0
    retry_base_seconds: float = 10.0
    retry_max_seconds: float = 300.0
    dispatch_timeout_seconds: float = 10.0
    breaker_threshold: int = 5
    breaker_cooldown_seconds: float = 60.0
    tick_seconds: float = 60.0
    chain_read_timeout_seconds: float = 1.0
    production: bool = False
    secret_generated: bool = False
    # Live event streams (QUEUE_EVENTS_*): lifetime, heartbeat and polling period.
    events_max_seconds: float = 250.0
    events_heartbeat_seconds: float = 10.0
    events_poll_seconds: float = 1.0
    # QUEUE_MODEL_PRICES and METRICS_TOKEN (CONTRACT §7d).
    model_prices: Mapping[str, ModelPrice] = field(default_factory=dict, hash=False)
    metrics_token: str | None = None
    # Flow control for a shared paid model (CONTRACT §8a, aiqueue/flow.py): the
    # declared budgets (0 = none) over a window of budget_window_seconds, and
    # how long a row may keep being refused before it fails as rate_limited.
    tokens_per_minute: int = 0
    requests_per_minute: int = 0
    budget_window_seconds: float = 60.0
    refused_give_up_seconds: float = 86400.0

    @property
    def queue_secret(self) -> str:
        """The newest MARKING_QUEUE_SECRET: it signs and is sent on the chain."""
        return self.queue_secrets[0] if self.queue_secrets else ""

    def with_overrides(self, **changes: object) -> Settings:
        """Return a copy with some fields replaced (tests and the dev command)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
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


def _float(
    env: Mapping[str, str], name: str, default: float, minimum: float,
    maximum: float = float("inf"),
) -> float:
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


def _url(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.startswith(("http://", "https://")):
        raise SettingsError(f"{name} must be an http(s) URL, got {raw!r}")
    return raw


def _db_url(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.startswith(("postgres://", "postgresql://")):
        raise SettingsError(f"{name} must be a postgresql:// URL")
    return raw


def _secrets(env: Mapping[str, str], name: str, minimum: int = 16) -> tuple[str, ...]:
    """Space-separated values, newest first; each at least `minimum` characters."""
    values = tuple(env.get(name, "").split())
    if any(len(v) < minimum for v in values):
        raise SettingsError(f"{name}: each value must be at least {minimum} characters")
    return values


def _prices(env: Mapping[str, str]) -> dict[str, ModelPrice]:
    """QUEUE_MODEL_PRICES: {"<model>": {"input": usd_per_1m, "output": usd_per_1m}}."""
    raw = env.get("QUEUE_MODEL_PRICES", "").strip()
    if not raw:
        return {}
    problem = "must be a JSON object {\"<model>\": {\"input\": <USD per 1M tokens>, " \
              "\"output\": <USD per 1M tokens>}}"
    try:
        data = json.loads(raw)
    except ValueError:
        raise SettingsError(f"QUEUE_MODEL_PRICES is not valid JSON; it {problem}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"QUEUE_MODEL_PRICES {problem}")
    prices = {}
    for model, price in data.items():
        ok = isinstance(price, dict) and set(price) == {"input", "output"} and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and v >= 0 for v in price.values())
        if not ok or not model:
            raise SettingsError(f"QUEUE_MODEL_PRICES[{model[:60]!r}] {problem}")
        prices[model] = ModelPrice(float(price["input"]), float(price["output"]))
    return prices


def load_settings(env: Mapping[str, str] | None = None, *, port: int = 8000) -> Settings:
    """Read and validate the environment; raise SettingsError naming the bad variable."""
    env = os.environ if env is None else env
    production = bool(env.get("VERCEL")) or env.get("AIQUEUE_ENV", "").lower() == "production"
    database_url = _db_url(env, "DATABASE_URL", None)
    if production and database_url is None:
        raise SettingsError("DATABASE_URL is required in production")
    queue_secrets = _secrets(env, "MARKING_QUEUE_SECRET")
    generated = False
    if not queue_secrets:
        if production:
            raise SettingsError("MARKING_QUEUE_SECRET is required in production")
        queue_secrets, generated = (secrets.token_urlsafe(24),), True
    mode = env.get("AI_MARKING_FUNCTION_MODE", "async").strip().lower() or "async"
    if mode not in ("async", "sync"):
        raise SettingsError(f"AI_MARKING_FUNCTION_MODE must be 'async' or 'sync', got {mode!r}")
    base = (_url(env, "APP_BASE_URL", None) or f"http://127.0.0.1:{port}").rstrip("/")
    target, digitalocean, aws_lambda = load_target(env, mode)
    function_url = _url(env, "AI_MARKING_FUNCTION_URL", None)
    if function_url is None:
        if production and target == "http":
            raise SettingsError("AI_MARKING_FUNCTION_URL is required in production")
        function_url = "http://127.0.0.1:8001/"
    return Settings(
        database_url=database_url,
        database_direct_url=_db_url(env, "DATABASE_DIRECT_URL", database_url),
        database_pool_max=_int(env, "DATABASE_POOL_MAX", 4, 1),
        queue_secrets=queue_secrets,
        cron_secrets=_secrets(env, "CRON_SECRET", minimum=1),
        admin_password=env.get("AI_QUEUE_ADMIN_PASSWORD", "").strip() or queue_secrets[0],
        app_base_url=base,
        function_url=function_url,
        function_token=env.get("AI_MARKING_FUNCTION_TOKEN", "").strip() or None,
        function_mode="sync" if mode == "sync" else "async",
        dispatch_target=target,
        digitalocean=digitalocean,
        aws_lambda=aws_lambda,
        callback_url=_url(env, "AI_MARKING_CALLBACK_URL", None) or f"{base}/webhooks/ai-mark",
        max_attempts=_int(env, "QUEUE_MAX_ATTEMPTS", 3, 1),
        max_in_flight=_int(env, "QUEUE_MAX_IN_FLIGHT", 1, 0),
        stuck_after_seconds=_float(env, "QUEUE_STUCK_AFTER_SECONDS", 600.0, 1.0),
        prune_after_days=_float(env, "QUEUE_PRUNE_AFTER_DAYS", 7.0, 0.0),
        retry_base_seconds=_float(env, "QUEUE_RETRY_BASE_SECONDS", 10.0, 0.0),
        retry_max_seconds=_float(env, "QUEUE_RETRY_MAX_SECONDS", 300.0, 0.0),
        dispatch_timeout_seconds=_float(env, "QUEUE_DISPATCH_TIMEOUT_SECONDS", 10.0, 0.1),
        breaker_threshold=_int(env, "QUEUE_BREAKER_THRESHOLD", 5, 1),
        breaker_cooldown_seconds=_float(env, "QUEUE_BREAKER_COOLDOWN_SECONDS", 60.0, 0.0),
        tick_seconds=_float(env, "QUEUE_TICK_SECONDS", 60.0, 0.0),
        production=production,
        secret_generated=generated,
        # vercel.json gives each function 60 s: end a stream before the platform cuts it.
        events_max_seconds=_float(env, "QUEUE_EVENTS_MAX_SECONDS",
                                  55.0 if env.get("VERCEL") else 250.0, 0.05, 3600),
        # The contract asks for a heartbeat at least every 15 s.
        events_heartbeat_seconds=min(
            _float(env, "QUEUE_EVENTS_HEARTBEAT_SECONDS", 10.0, 0.05, 3600), 15.0),
        events_poll_seconds=_float(env, "QUEUE_EVENTS_POLL_SECONDS", 1.0, 0.05, 3600),
        model_prices=_prices(env),
        metrics_token=env.get("METRICS_TOKEN", "").strip() or None,
        # Flow control (CONTRACT §8a).
        tokens_per_minute=_int(env, "QUEUE_TOKENS_PER_MINUTE", 0, 0),
        requests_per_minute=_int(env, "QUEUE_REQUESTS_PER_MINUTE", 0, 0),
        budget_window_seconds=_float(env, "QUEUE_BUDGET_WINDOW_SECONDS", 60.0, 0.1, 3600),
        refused_give_up_seconds=_float(env, "QUEUE_REFUSED_GIVE_UP_SECONDS", 86400.0, 0.0),
    )
