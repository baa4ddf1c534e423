"""Per-app resources in one place: the Runtime and the live-event hub.

The lifespan closes them; each is also made on first use, because serverless
platforms may skip the lifespan.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request

from aiqueue import tracing
from aiqueue.dispatch.aws import OidcToken
from aiqueue.errors import SettingsError
from aiqueue.reads.live import EventHub, LiveConfig
from aiqueue.runtime import Clock, Runtime, database_clock
from aiqueue.settings import Settings
from aiqueue.tokens import Tokens


class AppState:
    """Everything one app instance holds beyond a request."""

    def __init__(self, settings: Settings, clock: Clock = database_clock) -> None:
        self.settings = settings
        self.clock = clock
        # Signed tokens need only the settings: the gate checks sessions without the database.
        self.tokens = Tokens(settings.queue_secrets, session_binding=settings.session_binding)
        self.runtime: Runtime | None = None
        self.hub: EventHub | None = None
        # Streams' lifetime, heartbeat and polling (dev and tests shorten them).
        self.live_config = LiveConfig.from_settings(settings)
        # Vercel's OIDC token, as the newest request carried it (dispatch/aws.py).
        self.oidc = OidcToken(settings.vercel_oidc_token)
        self._lock = asyncio.Lock()
        tracing.prepare(settings.tracing)

    async def get(self, *, check_schema: bool = True) -> Runtime:
        """The instance's Runtime; unless told otherwise, 503 schema_behind while the
        database's schema is older than the code (checked once per instance)."""
        if self.runtime is None:
            async with self._lock:
                if self.runtime is None:
                    if not self.settings.database_url:
                        raise SettingsError("DATABASE_URL is not set")
                    self.runtime = await Runtime.create(
                        self.settings, self.settings.database_url, self.tokens, self.oidc,
                        clock=self.clock)
        if check_schema:
            await self.runtime.require_schema()
        return self.runtime

    def event_hub(self) -> EventHub:
        """The instance's hub of live-event streams."""
        if self.hub is None:
            self.hub = EventHub(self.settings.database_direct_url, self.live_config)
        return self.hub

    async def close_streams(self) -> None:
        """End every open stream (before a graceful shutdown)."""
        if self.hub is not None:
            await self.hub.close()

    async def close(self) -> None:
        await self.close_streams()
        if self.runtime is not None:
            await self.runtime.close()
            self.runtime = None


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.aiqueue
    return state


async def runtime(request: Request) -> Runtime:
    return await app_state(request).get()
