"""Who reaches the queue, and the shared login throttle: named queries of sql/security.sql."""

from __future__ import annotations

from aiqueue.db.gateway import Gateway
from aiqueue.models import Exposure


class SecurityQueries(Gateway):
    """The lockdown check (CONTRACT §8b) and the /ai-queue login throttle."""

    async def queue_exposures(self) -> list[Exposure]:
        """Every (role, object, privilege) by which a role other than the owner and the
        runtime role reaches a queue object; empty when the lockdown holds."""
        return [Exposure.from_row(r) for r in await self._fetch("queue_exposures", page=True)]

    async def login_blocked(self, client: str, window_seconds: float, limit: int) -> bool:
        """Whether `client` failed `limit` logins within the window (every instance counts)."""
        return bool(await self._fetchval("login_blocked", client, window_seconds, limit))

    async def login_failed(self, client: str, window_seconds: float) -> None:
        """Record a failed login (and prune the failures older than the window)."""
        await self._write("login_failed", client, window_seconds, page=True)
