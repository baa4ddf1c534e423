"""The shared resources of one app instance: settings, store, outgoing HTTP, tokens."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

import httpx
import typing_extensions

from aiqueue import logs
from aiqueue.db.doctor import code_schema_version
from aiqueue.db.store import Store, connect_pool
from aiqueue.dispatch.aws import AwsCredentials, OidcToken
from aiqueue.errors import SchemaBehind, ZoneUnknown
from aiqueue.settings import Settings
from aiqueue.tokens import Tokens
from aiqueue.tracing import Tracer, start

# While the schema is behind, look again this often (a migration may have run since).
SCHEMA_RECHECK_SECONDS = 10.0

# The moment time-of-day figures ("today", the last 24 h) are for; None is the
# database's own now().  Tests inject a fixed one instead of waiting out midnight.
Clock = Callable[[], datetime | None]
Owned = TypeVar("Owned")
# The store a rule sees: the whole Store unless the rule names its port
# (aiqueue/ports.py, e.g. Runtime[LoopStore]), which a test's fake store can fill.
StoreT = typing_extensions.TypeVar("StoreT", covariant=True, default=Store)


def database_clock() -> datetime | None:
    return None


def http_client() -> httpx.AsyncClient:
    """The instance's one pooled keep-alive client: dispatch to the function and the chain."""
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
    # Redirects are not followed: a 3xx is a refusal, never a second POST elsewhere.
    return httpx.AsyncClient(limits=limits, follow_redirects=False)


@dataclass
class Runtime(Generic[StoreT]):
    """Everything a request needs beyond itself; built once per instance."""

    settings: Settings
    store: StoreT
    http: httpx.AsyncClient
    tokens: Tokens
    # Each module's own per-instance state (its timers, the Lambda timeout it
    # read), keyed by the type that module defines: see own().
    owned: dict[type, object] = field(default_factory=dict)
    # The Lambda target's credentials when it assumes a role (AWS_ROLE_ARN), else None.
    aws: AwsCredentials | None = None
    # The schema check (require_schema): passed once, it is never run again.
    schema_ok: bool = False
    schema_behind: SchemaBehind | None = None
    schema_checked: float = float("-inf")
    # A time zone setting the database does not know (found with the schema check).
    zone_unknown: ZoneUnknown | None = None
    # "now" of the time-of-day figures (tests inject a fixed moment)
    clock: Clock = database_clock
    # One trace per job (docs/tracing.md); off unless an OTLP endpoint is set.
    tracer: Tracer = field(default_factory=Tracer)

    @classmethod
    async def create(cls, settings: Settings, dsn: str, tokens: Tokens | None = None,
                     oidc: OidcToken | None = None,
                     clock: Clock = database_clock) -> Runtime:
        pool = await connect_pool(dsn, max_size=settings.database_pool_max,
                                  prepared=settings.database_prepared_statements)
        target = settings.aws_lambda
        aws = None
        if settings.dispatch_target == "lambda" and target is not None and target.role_arn:
            aws = AwsCredentials(target, oidc or OidcToken(settings.vercel_oidc_token))
        tokens = tokens or Tokens(settings.queue_secrets,
                                  session_binding=settings.session_binding)
        return Runtime(settings=settings, store=Store(pool), http=http_client(), tokens=tokens,
                       aws=aws, clock=clock, tracer=start(settings.tracing))

    def own(self, kind: type[Owned]) -> Owned:
        """This instance's `kind`, made on first use: a module keeps its own state here,
        so the runtime needn't know any module's timers."""
        found = self.owned.get(kind)
        if found is None:
            found = self.owned[kind] = kind()
        assert isinstance(found, kind)
        return found

    async def require_schema(self: Runtime[Store]) -> None:
        """Raise SchemaBehind while the database's schema is older than this code's.

        One query per instance once it passes; while behind, at most one every
        SCHEMA_RECHECK_SECONDS, and the log line is written once.
        """
        if self.schema_ok:
            if self.zone_unknown is not None:
                raise self.zone_unknown
            return
        now = time.monotonic()
        if self.schema_behind is None or now - self.schema_checked >= SCHEMA_RECHECK_SECONDS:
            self.schema_checked = now
            expected, found = code_schema_version(), await self.store.schema_version()
            if found is None:
                # A role that may not read aiqueue_migrations: no check rather than no
                # service (the doctor reports it).
                logs.event("schema_unchecked", expected=expected)
            if found is None or found >= expected:
                self.schema_ok, self.schema_behind = True, None
                await self._check_zones()
                return
            if self.schema_behind is None:
                logs.event("schema_behind", expected=expected, found=found)
            self.schema_behind = SchemaBehind(expected, found)
        assert self.schema_behind is not None
        raise self.schema_behind

    async def _check_zones(self: Runtime[Store]) -> None:
        """Once per instance, with the schema: refuse (ZoneUnknown, logged once) a time zone
        setting the database does not know; UTC alone needs no query."""
        self.zone_unknown = await unknown_zone(self.store, self.settings)
        if self.zone_unknown is not None:
            logs.event("timezone_unknown", check=self.zone_unknown.setting)
            raise self.zone_unknown

    async def close(self: Runtime[Store]) -> None:
        await self.http.aclose()
        await self.store.close()
        await self.tracer.close()


async def unknown_zone(store: Store, settings: Settings) -> ZoneUnknown | None:
    """The first time zone setting (QUEUE_TIMEZONE, a pool's `timezone`) the database does
    not know, or None: the start-up's and the doctor's one rule."""
    named = [(setting, zone) for setting, zone in settings.zones if zone != "UTC"]
    if not named:
        return None
    unknown = set(await store.unknown_zones([zone for _, zone in named]))
    for setting, zone in named:
        if zone in unknown:
            return ZoneUnknown(setting, zone)
    return None
