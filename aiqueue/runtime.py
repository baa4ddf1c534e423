"""The shared resources of one app instance: settings, store, outgoing HTTP, tokens."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import httpx

from aiqueue.db.store import Store, connect_pool
from aiqueue.settings import Settings
from aiqueue.tokens import Tokens
from aiqueue.transport import LeanTransport, Poster


@dataclass
class Runtime:
    """Everything a request needs beyond itself; built once per instance."""

    settings: Settings
    store: Store
    http: Poster
    tokens: Tokens
    background: set[asyncio.Task[None]] = field(default_factory=set)
    # monotonic time when this instance next runs recovery and pruning
    housekeeping_due: float = 0.0

    @classmethod
    async def create(cls, settings: Settings, dsn: str) -> Runtime:
        pool = await connect_pool(dsn, max_size=settings.database_pool_max)
        # One transport for the whole instance: keep-alive to the function and to ourselves.
        transport: httpx.AsyncBaseTransport = LeanTransport() if settings.lean_http else (
            httpx.AsyncHTTPTransport(
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=20)))
        return cls(settings=settings, store=Store(pool), http=Poster(transport),
                   tokens=Tokens(settings.queue_secret))

    async def close(self) -> None:
        if self.background:
            await asyncio.gather(*self.background, return_exceptions=True)
        await self.http.aclose()
        await self.store.close()
