"""Per-app shared state: the Runtime, built in the lifespan or on first use."""

from __future__ import annotations

import asyncio

from starlette.requests import Request

from aiqueue.errors import SettingsError
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings


class AppState:
    """Holds one Runtime per app; serverless platforms may skip the lifespan."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.runtime: Runtime | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> Runtime:
        if self.runtime is None:
            async with self._lock:
                if self.runtime is None:
                    if not self.settings.database_url:
                        raise SettingsError("DATABASE_URL is not set")
                    self.runtime = await Runtime.create(self.settings, self.settings.database_url)
        return self.runtime

    async def close(self) -> None:
        if self.runtime is not None:
            await self.runtime.close()
            self.runtime = None


async def runtime(request: Request) -> Runtime:
    state: AppState = request.app.state.aiqueue
    return await state.get()
