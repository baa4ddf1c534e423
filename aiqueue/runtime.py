"""The shared resources of one app instance: settings, store, outgoing HTTP, tokens."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import httpx

from aiqueue.db.store import Store, connect_pool
from aiqueue.settings import Settings
from aiqueue.tokens import Tokens

# The moment time-of-day figures ("today", the last 24 h) are for; None is the
# database's own now().  Tests inject a fixed one instead of waiting out midnight.
Clock = Callable[[], datetime | None]


def database_clock() -> datetime | None:
    return None


def http_client() -> httpx.AsyncClient:
    """The instance's one pooled keep-alive client: dispatch to the function and the chain."""
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
    # Redirects are not followed: a 3xx is a refusal, never a second POST elsewhere.
    return httpx.AsyncClient(limits=limits, follow_redirects=False)


@dataclass
class Runtime:
    """Everything a request needs beyond itself; built once per instance."""

    settings: Settings
    store: Store
    http: httpx.AsyncClient
    tokens: Tokens
    # monotonic time when this instance next runs recovery and pruning
    housekeeping_due: float = 0.0
    clock: Clock = database_clock

    @classmethod
    async def create(cls, settings: Settings, dsn: str, tokens: Tokens | None = None,
                     clock: Clock = database_clock) -> Runtime:
        pool = await connect_pool(dsn, max_size=settings.database_pool_max)
        return cls(settings=settings, store=Store(pool), http=http_client(),
                   tokens=tokens or Tokens(settings.queue_secrets), clock=clock)

    async def close(self) -> None:
        await self.http.aclose()
        await self.store.close()
