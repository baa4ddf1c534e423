"""Who reaches the queue, and the shared login throttle: named queries of sql/security.sql."""

from __future__ import annotations

from aiqueue.db.gateway import Gateway
from aiqueue.models import AppRole, Exposure, Reader


class SecurityQueries(Gateway):
    """The lockdown check (docs/deploying/databases.md) and the /ai-queue login throttle."""

    async def queue_exposures(self) -> list[Exposure]:
        """Every (role, object, privilege) by which a role other than the owner and the
        runtime role reaches a queue object; empty when the lockdown holds."""
        return [Exposure.from_row(r) for r in await self._fetch("queue_exposures", page=True)]

    async def platform_roles(self) -> list[str]:
        """The platform's own roles (superusers, BYPASSRLS members of pg_read_all_data)."""
        return [r["role"] for r in await self._fetch("platform_roles", page=True)]

    async def wide_members(self) -> list[str]:
        """Roles that reach every table through pg_read_all_data/pg_write_all_data."""
        return [r["role"] for r in await self._fetch("wide_members", page=True)]

    async def submissions_readers(self) -> list[Reader]:
        """Who but the owner, the runtime role and the platform can read the host's
        `submissions` (empty when migration 0001 created it: it is a queue object then)."""
        return [Reader(r["role"], r["row_security"])
                for r in await self._fetch("submissions_readers", page=True)]

    async def app_role(self) -> AppRole | None:
        """The powers of the role this pool logs in as."""
        row = await self._fetchrow("app_role", page=True)
        return None if row is None else AppRole.from_row(row)

    async def login_blocked(self, client: str, window_seconds: float, limit: int) -> bool:
        """Whether `client` failed `limit` logins within the window (every instance counts)."""
        return bool(await self._fetchval("login_blocked", client, window_seconds, limit))

    async def login_failed(self, client: str, window_seconds: float) -> None:
        """Record a failed login (and prune the failures older than the window)."""
        await self._write("login_failed", client, window_seconds, page=True)
