"""Per-app resources in one place: the Runtime, the live-event hub, the login throttle.

The lifespan closes them; each is also made on first use, because serverless
platforms may skip the lifespan.
"""

from __future__ import annotations

import asyncio
from collections import deque

from starlette.requests import Request

from aiqueue.errors import SettingsError
from aiqueue.live import EventHub, LiveConfig
from aiqueue.runtime import Clock, Runtime, database_clock
from aiqueue.settings import Settings
from aiqueue.tokens import Tokens

FAILURE_LIMIT, FAILURE_WINDOW = 5, 300.0


class LoginThrottle:
    """Per-address sliding window of failed logins (per instance)."""

    def __init__(self, limit: int = FAILURE_LIMIT, window: float = FAILURE_WINDOW) -> None:
        self.limit, self.window = limit, window
        self.failures: dict[str, deque[float]] = {}

    def blocked(self, key: str, now: float) -> bool:
        recent = self.failures.get(key)
        while recent and now - recent[0] > self.window:
            recent.popleft()
        return bool(recent) and len(recent) >= self.limit  # type: ignore[arg-type]

    def fail(self, key: str, now: float) -> None:
        if len(self.failures) > 10_000:
            self.failures.clear()
        self.failures.setdefault(key, deque()).append(now)


class AppState:
    """Everything one app instance holds beyond a request."""

    def __init__(self, settings: Settings, clock: Clock = database_clock) -> None:
        self.settings = settings
        self.clock = clock
        # Signed tokens need only the settings: the gate checks sessions without the database.
        self.tokens = Tokens(settings.queue_secrets)
        self.runtime: Runtime | None = None
        self.hub: EventHub | None = None
        # Streams' lifetime, heartbeat and polling (dev and tests shorten them).
        self.live_config = LiveConfig.from_settings(settings)
        self.login_throttle = LoginThrottle()
        self._lock = asyncio.Lock()

    async def get(self) -> Runtime:
        if self.runtime is None:
            async with self._lock:
                if self.runtime is None:
                    if not self.settings.database_url:
                        raise SettingsError("DATABASE_URL is not set")
                    self.runtime = await Runtime.create(
                        self.settings, self.settings.database_url, self.tokens, self.clock)
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
