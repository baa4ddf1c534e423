"""The settings table: one frozen `Settings`, each field read from one variable.

A field read from one variable names it, its default and its check once
(`number`, `optional`, `entry` in aiqueue/settings/env.py); `load_settings`
(aiqueue/settings/__init__.py) reads them all in one loop.  What is derived
from the table (every kind and pool, each kind's dispatch target, the money
document) is built once per Settings, as a cached property.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

from aiqueue.settings.calendar import UTC_NAME, env_timezone
from aiqueue.settings.env import (
    ModelPrice,
    PreparedStatements,
    entry,
    env_prepared,
    env_prices,
    env_text,
    env_usd,
    env_whsec,
    number,
    optional,
)
from aiqueue.settings.kinds import DEFAULT_KIND, DEFAULT_POOL, Kind, Pool, QueueConfig, merged
from aiqueue.settings.money import Money
from aiqueue.settings.plan import ClaimPlan
from aiqueue.settings.prompt_cache import PromptCache
from aiqueue.settings.safety import cron_values, single_secret
from aiqueue.settings.targets import (
    DispatchTarget,
    DoTarget,
    FunctionMode,
    KindTarget,
    LambdaTarget,
)
from aiqueue.settings.tracing import Tracing, env_tracing

# Where jobs go in development: the bundled reference function (aiqueue/dev).
DEV_FUNCTION_URL = "http://127.0.0.1:8001/"


@dataclass(frozen=True)
class Settings:
    """Everything aiqueue reads from its environment (docs/configuration.md)."""

    database_url: str | None = None
    database_direct_url: str | None = None
    # The most connections one instance opens.
    database_pool_max: int = number("DATABASE_POOL_MAX", 4, 1)
    # Prepared statements kept per connection (aiqueue/db/prepared.py).
    database_prepared_statements: PreparedStatements = field(
        default="auto", metadata=entry("DATABASE_PREPARED_STATEMENTS", env_prepared))
    # MARKING_QUEUE_SECRET and CRON_SECRET: several values, newest first (rotation).
    queue_secrets: tuple[str, ...] = ()
    cron_secrets: tuple[str, ...] = field(default=(), metadata=entry("CRON_SECRET", cron_values))
    admin_password: str = ""
    app_base_url: str = "http://127.0.0.1:8000"
    function_url: str = DEV_FUNCTION_URL
    function_token: str | None = optional("AI_MARKING_FUNCTION_TOKEN", env_text)
    function_mode: FunctionMode = "async"
    # AI_MARKING_DISPATCH and its target's settings (aiqueue/settings/targets.py).
    dispatch_target: DispatchTarget = "http"
    digitalocean: DoTarget | None = None
    aws_lambda: LambdaTarget | None = None
    callback_url: str = "http://127.0.0.1:8000/webhooks/ai-mark"
    max_attempts: int = number("QUEUE_MAX_ATTEMPTS", 3, 1)
    max_in_flight: int = number("QUEUE_MAX_IN_FLIGHT", 1, 0)
    stuck_after_seconds: float = number("QUEUE_STUCK_AFTER_SECONDS", 600.0, 1.0)
    prune_after_days: float = number("QUEUE_PRUNE_AFTER_DAYS", 7.0, 0.0)
    # A school's data (docs/operating/data-protection.md, aiqueue/records/retention.py): failed,
    # cancelled and expired rows, then results and attempt history, are kept this long.
    retain_ended_days: float = number("QUEUE_RETAIN_ENDED_DAYS", 30.0, 0.0, 36500)
    retain_history_days: float = number("QUEUE_RETAIN_HISTORY_DAYS", 365.0, 0.0, 36500)
    retry_base_seconds: float = number("QUEUE_RETRY_BASE_SECONDS", 10.0, 0.0)
    retry_max_seconds: float = number("QUEUE_RETRY_MAX_SECONDS", 300.0, 0.0)
    dispatch_timeout_seconds: float = number("QUEUE_DISPATCH_TIMEOUT_SECONDS", 10.0, 0.1)
    breaker_threshold: int = number("QUEUE_BREAKER_THRESHOLD", 5, 1)
    breaker_cooldown_seconds: float = number("QUEUE_BREAKER_COOLDOWN_SECONDS", 60.0, 0.0)
    tick_seconds: float = number("QUEUE_TICK_SECONDS", 60.0, 0.0)
    chain_read_timeout_seconds: float = 1.0
    production: bool = False
    secret_generated: bool = False
    # DATABASE_URL was unset: the embedded development database (db/embedded.py).
    embedded_database: bool = False
    # Live event streams: lifetime, heartbeat and polling period.  vercel.json gives
    # each function 60 s: a stream ends before the platform cuts it.  The contract
    # asks for a heartbeat at least every 15 s.
    events_max_seconds: float = number("QUEUE_EVENTS_MAX_SECONDS", 250.0, 0.05, 3600,
                                        on_vercel=55.0)
    events_heartbeat_seconds: float = number("QUEUE_EVENTS_HEARTBEAT_SECONDS", 10.0, 0.05,
                                              3600, cap=15.0)
    events_poll_seconds: float = number("QUEUE_EVENTS_POLL_SECONDS", 1.0, 0.05, 3600)
    # docs/concepts.md.
    model_prices: Mapping[str, ModelPrice] = field(
        default_factory=dict, hash=False, metadata=entry("QUEUE_MODEL_PRICES", env_prices))
    metrics_token: str | None = optional("METRICS_TOKEN", single_secret)
    # -- safe on a shared database (docs/deploying/databases.md) --
    # Standard Webhooks signing of `http` dispatches.
    signing_secret: str | None = optional("AI_MARKING_SIGNING_SECRET", env_whsec)
    # Notifications to the host app (docs/integrating.md; aiqueue/notify/delivery.py): where events
    # go, the Standard Webhooks secret that signs them, each attempt's HTTP
    # timeout, the first retry's delay and how long retries go on.
    notify_url: str | None = None
    notify_secret: str | None = None
    notify_timeout_seconds: float = number("QUEUE_NOTIFY_TIMEOUT_SECONDS", 5.0, 0.05, 60)
    notify_retry_base_seconds: float = number("QUEUE_NOTIFY_RETRY_BASE_SECONDS", 5.0, 0.0, 3600)
    notify_give_up_seconds: float = number("QUEUE_NOTIFY_GIVE_UP_SECONDS", 86400.0, 1.0,
                                            7 * 86400)
    # A dead invocation gives its slot back fast (docs/guarantees.md): a row that sent a
    # heartbeat is recovered this long after its last one; a platform's time limit
    # bounds the wait, plus this grace.
    heartbeat_timeout_seconds: float = number("QUEUE_HEARTBEAT_TIMEOUT_SECONDS", 90.0, 0.05)
    platform_grace_seconds: float = number("QUEUE_PLATFORM_GRACE_SECONDS", 30.0, 0.0, 3600)
    # -- set-up (docs/operating/doctor.md, aiqueue/doctor/checks.py) --
    # VERCEL is set; `vercel dev` (VERCEL_ENV=development) may run on a local address.
    on_vercel: bool = False
    vercel_dev: bool = False
    # Exchanged for AWS credentials when AWS_ROLE_ARN is set.
    vercel_oidc_token: str | None = optional("VERCEL_OIDC_TOKEN", env_text, secret=True)
    # The AWS_* variables present (names only): on Vercel they may be the
    # platform's placeholders, which the doctor names when Lambda refuses.
    aws_env_names: tuple[str, ...] = ()
    # Flow control for a shared paid model (docs/concepts.md, aiqueue/flow.py): the
    # declared budgets (0 = none) over a window, and how long a row may keep
    # being refused before it fails as rate_limited.
    tokens_per_minute: int = number("QUEUE_TOKENS_PER_MINUTE", 0, 0)
    requests_per_minute: int = number("QUEUE_REQUESTS_PER_MINUTE", 0, 0)
    budget_window_seconds: float = number("QUEUE_BUDGET_WINDOW_SECONDS", 60.0, 0.1, 3600)
    refused_give_up_seconds: float = number("QUEUE_REFUSED_GIVE_UP_SECONDS", 86400.0, 0.0)
    # The overnight lane (docs/overnight.md): a batch goes live this long before its rows' live
    # time runs out; its pools' batch APIs are in aiqueue.toml (Settings.queue).
    batch_margin_seconds: float = number("QUEUE_BATCH_FALLBACK_MARGIN_SECONDS", 900.0, 0.0)
    # The default pool's spend caps in USD (docs/concepts.md); None: none.  Read here,
    # kept on the default Pool (Settings.queue); enforced by the spend caps' own code.
    group_usd_per_hour: float | None = optional("QUEUE_GROUP_USD_PER_HOUR", env_usd)
    group_usd_per_day: float | None = optional("QUEUE_GROUP_USD_PER_DAY", env_usd)
    pool_usd_per_day: float | None = optional("QUEUE_USD_PER_DAY", env_usd)
    # The default pool's provider prompt cache (docs/prompt-cache.md): an unused prefix's
    # life (0: schedule as before) and the shortest prefix it caches.
    prompt_cache_ttl_seconds: float = number("QUEUE_PROMPT_CACHE_TTL_SECONDS", 300.0, 0.0)
    prompt_cache_min_tokens: int = number("QUEUE_PROMPT_CACHE_MIN_TOKENS", 1024, 0)
    # Where days begin (, aiqueue/settings/calendar.py): an IANA name.
    timezone: str = field(default=UTC_NAME, metadata=entry("QUEUE_TIMEZONE", env_timezone))
    # The spend windows' lengths: a clock hour and a day (tests shorten them).
    spend_hour_seconds: float = 3600.0
    spend_day_seconds: float = 86400.0
    # Alerts (, aiqueue/notify/alerts.py): backlog age, a stall, a failure spike.
    alert_backlog_age_seconds: float = number("QUEUE_ALERT_BACKLOG_AGE_SECONDS", 900.0, 0.0)
    alert_stalled_seconds: float = number("QUEUE_ALERT_STALLED_SECONDS", 300.0, 0.0)
    alert_failures_min: int = number("QUEUE_ALERT_FAILURES_MIN", 5, 1)
    alert_failure_rate: float = number("QUEUE_ALERT_FAILURE_RATE", 0.2, 0.0, 1.0)
    # ... and slow marking: the last 15 minutes' p95 processing time.
    alert_p95_seconds: float = number("QUEUE_ALERT_P95_SECONDS", 600.0, 0.0)
    # OpenTelemetry traces (docs/tracing.md): None, off (the standard OTEL_* variables).
    tracing: Tracing | None = optional("OTEL_EXPORTER_OTLP_ENDPOINT", env_tracing)
    # Kinds and pools declared in aiqueue.toml (docs/concepts.md); None: no file.
    queue_file: QueueConfig | None = field(default=None, hash=False, compare=False)
    # The environment as read at start-up: the key of a batch whose pool no longer
    # declares a batch API is looked up here by the variable recorded with the batch.
    environment: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False,
                                           repr=False)

    @cached_property
    def queue(self) -> QueueConfig:
        """Every kind and pool: the default ones from the fields above, and the file's."""
        default_pool = Pool(
            name=DEFAULT_POOL, max_in_flight=self.max_in_flight,
            tokens_per_minute=self.tokens_per_minute,
            requests_per_minute=self.requests_per_minute,
            prices={m: (p.input, p.output) for m, p in self.model_prices.items()},
            group_usd_per_hour=self.group_usd_per_hour,
            group_usd_per_day=self.group_usd_per_day, pool_usd_per_day=self.pool_usd_per_day,
            prompt_cache=PromptCache(ttl_seconds=self.prompt_cache_ttl_seconds,
                                     min_tokens=self.prompt_cache_min_tokens))
        default_kind = Kind(
            name=DEFAULT_KIND, pool=DEFAULT_POOL, dispatch=self.dispatch_target,
            function_url=self.function_url, function_token=self.function_token,
            digitalocean=self.digitalocean, aws_lambda=self.aws_lambda)
        return merged(self.queue_file, default_pool, default_kind)

    @cached_property
    def all_model_prices(self) -> Mapping[str, ModelPrice]:
        """QUEUE_MODEL_PRICES and every pool's prices (docs/concepts.md)."""
        return {m: ModelPrice(*p) for m, p in self.queue.prices.items()}

    @cached_property
    def zones(self) -> tuple[tuple[str, str], ...]:
        """Each time zone a setting names, as (the setting, the zone): QUEUE_TIMEZONE, then
        each pool's own `timezone` (the database must know them too: docs/configuration.md)."""
        own = ((f"pools.{name}.timezone", pool.timezone)
               for name, pool in self.queue.pools.items() if pool.timezone)
        return (("QUEUE_TIMEZONE", self.timezone), *own)

    @cached_property
    def money(self) -> Money:
        """Every pool's spend caps and prices, and the spend windows' lengths."""
        return Money.of(self.queue, self.spend_hour_seconds, self.spend_day_seconds,
                        self.timezone)

    @cached_property
    def claim_plan(self) -> ClaimPlan:
        """What the claim needs of these settings, as one jsonb document (settings/plan.py)."""
        return ClaimPlan.build(self.queue, self.breaker_threshold, self.budget_window_seconds,
                               self.money)

    @cached_property
    def targets(self) -> Mapping[str, KindTarget]:
        """Each kind's dispatch target: its own function, token and platform, else the
        deployment's (AI_MARKING_FUNCTION_URL's, when a kind names no URL)."""
        return {name: KindTarget(
            kind=name, dispatch=kind.dispatch,
            function_url=kind.function_url or self.function_url,
            function_token=self.function_token if kind.dispatch == "digitalocean"
            else kind.function_token, function_mode=self.function_mode,
            digitalocean=kind.digitalocean, aws_lambda=kind.aws_lambda,
            callback_url=self.callback_url, signing_secret=self.signing_secret,
            dispatch_timeout_seconds=self.dispatch_timeout_seconds)
            for name, kind in self.queue.kinds.items()}

    def target(self, kind: str = DEFAULT_KIND) -> KindTarget:
        """The kind's dispatch target; unknown kinds raise KeyError."""
        return self.targets[kind]

    @property
    def queue_secret(self) -> str:
        """The newest MARKING_QUEUE_SECRET: it signs and is sent on the chain."""
        return self.queue_secrets[0] if self.queue_secrets else ""

    @property
    def session_binding(self) -> str:
        """What a session is bound to besides the secrets: the admin password if it is its own.

        Changing AI_QUEUE_ADMIN_PASSWORD then ends every session. A password that
        falls back to MARKING_QUEUE_SECRET binds nothing more, so rotating the secret
        keeps sessions (docs/deploying/databases.md).
        """
        return "" if self.admin_password in self.queue_secrets else self.admin_password

    def with_overrides(self, **changes: object) -> Settings:
        """Return a copy with some fields replaced (tests and the dev command)."""
        return replace(self, **changes)  # type: ignore[arg-type]
