"""Settings read once from the environment into a frozen object."""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Literal, TypedDict

from aiqueue import config
from aiqueue.env_values import env_float as _float
from aiqueue.env_values import env_int as _int
from aiqueue.errors import SettingsError
from aiqueue.setup_settings import (
    AWS_ENV_NAMES,
    MIN_PASSWORD,
    app_base_url,
    cron_values,
    require_https,
    secret_values,
    single_secret,
    vercel_dev,
)
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
    # A school's data (CONTRACT §9e, aiqueue/records/retention.py): failed,
    # cancelled and expired rows, then results and attempt history, are kept this long.
    retain_ended_days: float = 30.0
    retain_history_days: float = 365.0
    retry_base_seconds: float = 10.0
    retry_max_seconds: float = 300.0
    dispatch_timeout_seconds: float = 10.0
    breaker_threshold: int = 5
    breaker_cooldown_seconds: float = 60.0
    tick_seconds: float = 60.0
    chain_read_timeout_seconds: float = 1.0
    production: bool = False
    secret_generated: bool = False
    # DATABASE_URL was unset: the embedded development database (db/embedded.py).
    embedded_database: bool = False
    # Live event streams (QUEUE_EVENTS_*): lifetime, heartbeat and polling period.
    events_max_seconds: float = 250.0
    events_heartbeat_seconds: float = 10.0
    events_poll_seconds: float = 1.0
    # QUEUE_MODEL_PRICES and METRICS_TOKEN (CONTRACT §7d).
    model_prices: Mapping[str, ModelPrice] = field(default_factory=dict, hash=False)
    metrics_token: str | None = None
    # -- safe on a shared database (CONTRACT §8b) --
    # AI_MARKING_SIGNING_SECRET: Standard Webhooks signing of `http` dispatches.
    signing_secret: str | None = None
    # Notifications to the host app (CONTRACT §8d; aiqueue/notify/delivery.py): where events
    # go, the Standard Webhooks secret that signs them, each attempt's HTTP
    # timeout, the first retry's delay and how long retries go on.
    notify_url: str | None = None
    notify_secret: str | None = None
    notify_timeout_seconds: float = 5.0
    notify_retry_base_seconds: float = 5.0
    notify_give_up_seconds: float = 86400.0
    # A dead invocation gives its slot back fast (CONTRACT §8e): a row that sent a
    # heartbeat is recovered this long after its last one; a platform's time limit
    # bounds the wait, plus this grace (QUEUE_PLATFORM_GRACE_SECONDS, default 30).
    heartbeat_timeout_seconds: float = 90.0
    platform_grace_seconds: float = 30.0
    # -- set-up (CONTRACT §8c, aiqueue/doctor/checks.py) --
    # VERCEL is set; `vercel dev` (VERCEL_ENV=development) may run on a local address.
    on_vercel: bool = False
    vercel_dev: bool = False
    # VERCEL_OIDC_TOKEN, exchanged for AWS credentials when AWS_ROLE_ARN is set.
    vercel_oidc_token: str | None = field(default=None, repr=False)
    # The AWS_* variables present (names only): on Vercel they may be the
    # platform's placeholders, which the doctor names when Lambda refuses.
    aws_env_names: tuple[str, ...] = ()
    # Flow control for a shared paid model (CONTRACT §8a, aiqueue/flow.py): the
    # declared budgets (0 = none) over a window of budget_window_seconds, and
    # how long a row may keep being refused before it fails as rate_limited.
    tokens_per_minute: int = 0
    requests_per_minute: int = 0
    budget_window_seconds: float = 60.0
    refused_give_up_seconds: float = 86400.0
    # The overnight lane (§9f): a batch goes live this long before its rows' live
    # time runs out (QUEUE_BATCH_FALLBACK_MARGIN_SECONDS); its pools: Settings.queue.
    batch_margin_seconds: float = 900.0
    # The default pool's spend caps in USD (CONTRACT §9c: QUEUE_GROUP_USD_PER_HOUR,
    # QUEUE_GROUP_USD_PER_DAY, QUEUE_USD_PER_DAY); None: none.  Read here, kept on
    # the default Pool (Settings.queue); enforced by the spend caps' own code.
    group_usd_per_hour: float | None = None
    group_usd_per_day: float | None = None
    pool_usd_per_day: float | None = None
    # The spend windows' lengths: a UTC hour and day (tests shorten them).
    spend_hour_seconds: float = 3600.0
    spend_day_seconds: float = 86400.0
    # Alerts (CONTRACT §9d, aiqueue/notify/alerts.py): backlog age, a stall, a failure spike.
    alert_backlog_age_seconds: float = 900.0
    alert_stalled_seconds: float = 300.0
    alert_failures_min: int = 5
    alert_failure_rate: float = 0.2
    # Kinds and pools declared in aiqueue.toml (CONTRACT §9b); None: no file.
    queue_file: config.QueueConfig | None = field(default=None, hash=False, compare=False)

    @cached_property
    def queue(self) -> config.QueueConfig:
        """Every kind and pool: the default ones from the fields above, and the file's."""
        default_pool = config.Pool(
            name=config.DEFAULT_POOL, max_in_flight=self.max_in_flight,
            tokens_per_minute=self.tokens_per_minute,
            requests_per_minute=self.requests_per_minute,
            prices={m: (p.input, p.output) for m, p in self.model_prices.items()},
            group_usd_per_hour=self.group_usd_per_hour,
            group_usd_per_day=self.group_usd_per_day, pool_usd_per_day=self.pool_usd_per_day)
        default_kind = config.Kind(
            name=config.DEFAULT_KIND, pool=config.DEFAULT_POOL, dispatch=self.dispatch_target,
            function_url=self.function_url, function_token=self.function_token,
            digitalocean=self.digitalocean, aws_lambda=self.aws_lambda)
        return config.merged(self.queue_file, default_pool, default_kind)

    @cached_property
    def all_model_prices(self) -> Mapping[str, ModelPrice]:
        """QUEUE_MODEL_PRICES and every pool's prices (CONTRACT §7d, §9b)."""
        return {m: ModelPrice(*p) for m, p in self.queue.prices.items()}

    def for_kind(self, name: str) -> Settings:
        """These settings with the kind's function: target, URL, token, attempts.

        The default kind's are the settings themselves; unknown kinds raise KeyError.
        """
        kind = self.queue.kind(name)
        if name == config.DEFAULT_KIND and self.queue_file is None:
            return self
        cache: dict[str, Settings] = self.__dict__.setdefault("_kind_settings", {})
        if name not in cache:
            cache[name] = replace(
                self, dispatch_target=kind.dispatch,
                function_url=kind.function_url or self.function_url,
                function_token=kind.function_token, digitalocean=kind.digitalocean,
                aws_lambda=kind.aws_lambda,
                max_attempts=kind.max_attempts or self.max_attempts)
        return cache[name]

    @property
    def queue_secret(self) -> str:
        """The newest MARKING_QUEUE_SECRET: it signs and is sent on the chain."""
        return self.queue_secrets[0] if self.queue_secrets else ""

    @property
    def session_binding(self) -> str:
        """What a session is bound to besides the secrets: the admin password if it is its own.

        Changing AI_QUEUE_ADMIN_PASSWORD then ends every session. A password that
        falls back to MARKING_QUEUE_SECRET binds nothing more, so rotating the secret
        keeps sessions (CONTRACT §8b).
        """
        return "" if self.admin_password in self.queue_secrets else self.admin_password

    def with_overrides(self, **changes: object) -> Settings:
        """Return a copy with some fields replaced (tests and the dev command)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _url(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.startswith(("http://", "https://")):
        raise SettingsError(f"{name} must be an http(s) URL, got {raw!r}")
    return raw


def _secure_url(env: Mapping[str, str], name: str, local_run: bool) -> str | None:
    """A URL the queue's secrets travel to: https:// unless local (CONTRACT §9a)."""
    url = _url(env, name, None)
    if url is not None:
        require_https(name, url, local_run=local_run)
    return url


def _db_url(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.startswith(("postgres://", "postgresql://")):
        raise SettingsError(f"{name} must be a postgresql:// URL")
    return raw


def _whsec(env: Mapping[str, str], name: str) -> str | None:
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


def _notify_secret(env: Mapping[str, str], url: str | None) -> str | None:
    """QUEUE_NOTIFY_SECRET: a Standard Webhooks secret, required with QUEUE_NOTIFY_URL."""
    secret = _whsec(env, "QUEUE_NOTIFY_SECRET")
    if secret is None and url is not None:
        raise SettingsError("QUEUE_NOTIFY_SECRET is required with QUEUE_NOTIFY_URL "
                            "(a Standard Webhooks secret, whsec_...)")
    if secret is not None and url is None:
        raise SettingsError("QUEUE_NOTIFY_SECRET is set but QUEUE_NOTIFY_URL is not")
    return secret


def load_settings(
    env: Mapping[str, str] | None = None, *, port: int = 8000, dev: bool = False
) -> Settings:
    """Read and validate the environment; raise SettingsError naming the bad variable.

    `dev` is the `dev` command, which (like `vercel dev`) may use http:// to any host.
    """
    env = os.environ if env is None else env
    local_run = dev or vercel_dev(env)
    production = bool(env.get("VERCEL")) or env.get("AIQUEUE_ENV", "").lower() == "production"
    database_url = _db_url(env, "DATABASE_URL", None)
    if production and database_url is None:
        raise SettingsError("DATABASE_URL is required in production")
    queue_secrets = secret_values(env, "MARKING_QUEUE_SECRET")
    generated = False
    if not queue_secrets:
        if production:
            raise SettingsError("MARKING_QUEUE_SECRET is required in production")
        queue_secrets, generated = (secrets.token_urlsafe(24),), True
    mode = env.get("AI_MARKING_FUNCTION_MODE", "async").strip().lower() or "async"
    if mode not in ("async", "sync"):
        raise SettingsError(f"AI_MARKING_FUNCTION_MODE must be 'async' or 'sync', got {mode!r}")
    base = app_base_url(env, port, _secure_url(env, "APP_BASE_URL", local_run))
    target, digitalocean, aws_lambda = load_target(env, mode, local_run=local_run)
    function_url = _secure_url(env, "AI_MARKING_FUNCTION_URL", local_run)
    queue_file = _queue_file(env, mode, local_run)
    if function_url is None and target != "http" and queue_file is not None and any(
            p.name == config.DEFAULT_POOL for p in queue_file.batch_pools):
        # The lane calls the function's render and parse modes synchronously, by HTTP.
        raise SettingsError("AI_MARKING_FUNCTION_URL (the function's web action or function "
                            "URL) is required for the batch lane with AI_MARKING_DISPATCH="
                            f"{target}")
    if function_url is None:
        if production and target == "http":
            raise SettingsError("AI_MARKING_FUNCTION_URL is required in production")
        function_url = "http://127.0.0.1:8001/"
    return _caps_priced(Settings(
        database_url=database_url,
        database_direct_url=_db_url(env, "DATABASE_DIRECT_URL", database_url),
        database_pool_max=_int(env, "DATABASE_POOL_MAX", 4, 1),
        queue_secrets=queue_secrets,
        cron_secrets=cron_values(env),
        admin_password=(single_secret(env, "AI_QUEUE_ADMIN_PASSWORD", MIN_PASSWORD)
                        or queue_secrets[0]),
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
        retain_ended_days=_float(env, "QUEUE_RETAIN_ENDED_DAYS", 30.0, 0.0, 36500),
        retain_history_days=_float(env, "QUEUE_RETAIN_HISTORY_DAYS", 365.0, 0.0, 36500),
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
        metrics_token=single_secret(env, "METRICS_TOKEN"),
        signing_secret=_whsec(env, "AI_MARKING_SIGNING_SECRET"),
        **_notify_fields(env, local_run),
        heartbeat_timeout_seconds=_float(env, "QUEUE_HEARTBEAT_TIMEOUT_SECONDS", 90.0, 0.05),
        platform_grace_seconds=_float(env, "QUEUE_PLATFORM_GRACE_SECONDS", 30.0, 0.0, 3600),
        on_vercel=bool(env.get("VERCEL")),
        vercel_dev=vercel_dev(env),
        vercel_oidc_token=env.get("VERCEL_OIDC_TOKEN", "").strip() or None,
        aws_env_names=tuple(n for n in AWS_ENV_NAMES if env.get(n, "").strip()),
        # Flow control (CONTRACT §8a).
        tokens_per_minute=_int(env, "QUEUE_TOKENS_PER_MINUTE", 0, 0),
        requests_per_minute=_int(env, "QUEUE_REQUESTS_PER_MINUTE", 0, 0),
        budget_window_seconds=_float(env, "QUEUE_BUDGET_WINDOW_SECONDS", 60.0, 0.1, 3600),
        refused_give_up_seconds=_float(env, "QUEUE_REFUSED_GIVE_UP_SECONDS", 86400.0, 0.0),
        batch_margin_seconds=_float(env, "QUEUE_BATCH_FALLBACK_MARGIN_SECONDS", 900.0, 0.0),
        group_usd_per_hour=_usd(env, "QUEUE_GROUP_USD_PER_HOUR"),
        group_usd_per_day=_usd(env, "QUEUE_GROUP_USD_PER_DAY"),
        pool_usd_per_day=_usd(env, "QUEUE_USD_PER_DAY"),
        queue_file=queue_file,
        # Alerts (CONTRACT §9d).
        alert_backlog_age_seconds=_float(env, "QUEUE_ALERT_BACKLOG_AGE_SECONDS", 900.0, 0.0),
        alert_stalled_seconds=_float(env, "QUEUE_ALERT_STALLED_SECONDS", 300.0, 0.0),
        alert_failures_min=_int(env, "QUEUE_ALERT_FAILURES_MIN", 5, 1),
        alert_failure_rate=_float(env, "QUEUE_ALERT_FAILURE_RATE", 0.2, 0.0, 1.0),
    ))


def _caps_priced(settings: Settings) -> Settings:
    """A spend cap (CONTRACT §9c) charges each dispatch at its pool's prices: a pool with a
    cap and no price known at all refuses start-up, naming the price setting."""
    caps = {"group_usd_per_hour": "QUEUE_GROUP_USD_PER_HOUR",
            "group_usd_per_day": "QUEUE_GROUP_USD_PER_DAY", "pool_usd_per_day": "QUEUE_USD_PER_DAY"}
    for pool in settings.queue.pools.values():
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
    return settings


def _usd(env: Mapping[str, str], name: str) -> float | None:
    """An optional amount of USD (a spend cap); unset: None."""
    if not env.get(name, "").strip():
        return None
    return _float(env, name, 0.0, 0.0)


def _queue_file(env: Mapping[str, str], mode: str,
                local_run: bool = False) -> config.QueueConfig | None:
    """aiqueue.toml (AIQUEUE_CONFIG), validated; sync mode reaches only http kinds."""
    file = config.load_file(env, config.config_path(env), local_run=local_run)
    if file is not None:
        config.merged(file, config.Pool(config.DEFAULT_POOL, 0, prices={
            m: (p.input, p.output) for m, p in _prices(env).items()}),
            config.Kind(config.DEFAULT_KIND, config.DEFAULT_POOL))  # prices agree
    if file is not None and mode == "sync":
        for kind in file.kinds.values():
            if kind.dispatch != "http":
                raise SettingsError(f"kinds.{kind.name}.dispatch = \"{kind.dispatch}\" does not "
                                    "work with AI_MARKING_FUNCTION_MODE=sync")
    return file


class _NotifyFields(TypedDict):
    notify_url: str | None
    notify_secret: str | None
    notify_timeout_seconds: float
    notify_retry_base_seconds: float
    notify_give_up_seconds: float


def _notify_fields(env: Mapping[str, str], local_run: bool) -> _NotifyFields:
    """The notification settings (QUEUE_NOTIFY_*), validated together."""
    url = _secure_url(env, "QUEUE_NOTIFY_URL", local_run)
    return {
        "notify_url": url,
        "notify_secret": _notify_secret(env, url),
        "notify_timeout_seconds": _float(env, "QUEUE_NOTIFY_TIMEOUT_SECONDS", 5.0, 0.05, 60),
        "notify_retry_base_seconds": _float(env, "QUEUE_NOTIFY_RETRY_BASE_SECONDS", 5.0, 0.0,
                                            3600),
        "notify_give_up_seconds": _float(env, "QUEUE_NOTIFY_GIVE_UP_SECONDS", 86400.0, 1.0,
                                         7 * 86400),
    }
