"""The shared resources of one app instance: settings, store, outgoing HTTP, tokens."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from aiqueue.db.store import Store, connect_pool
from aiqueue.dispatch.platform import LambdaTimeout
from aiqueue.settings import Settings
from aiqueue.tokens import Tokens


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
    # event-loop time when this instance next prunes the notification outbox
    notify_prune_due: float = 0.0
    # The Lambda function's timeout (CONTRACT §8e), read once per instance.
    lambda_timeout: LambdaTimeout = field(default_factory=LambdaTimeout)

    @classmethod
    async def create(cls, settings: Settings, dsn: str, tokens: Tokens | None = None) -> Runtime:
        pool = await connect_pool(dsn, max_size=settings.database_pool_max)
        return cls(settings=settings, store=Store(pool), http=http_client(),
                   tokens=tokens or Tokens(settings.queue_secrets))

    async def close(self) -> None:
        await self.http.aclose()
        await self.store.close()
