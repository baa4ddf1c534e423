"""The LISTEN session behind live events: one dedicated connection per instance."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg

from aiqueue.db.pool import app_name, wrap_error
from aiqueue.db.store import queries


class ChangeListener:
    """A dedicated session connection that LISTENs for queue changes (never via a pooler).

    While it lives it tells the database so every ANNOUNCE_EVERY seconds: the
    triggers send NOTIFY only while some instance listens (migration 0005).
    """

    # A silently dropped connection never reports itself: an announce that gets no
    # answer in time ends it.  15 + 5 s to notice, plus the hub's 5 s before it
    # opens a new one, keeps the replacement within the contract's 30 s.
    ANNOUNCE_EVERY = 15.0
    ANNOUNCE_TIMEOUT = 5.0

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn
        self._announcer: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls, dsn: str, channel: str, on_notify: Callable[[], None], on_lost: Callable[[], None]
    ) -> ChangeListener:
        """Connect, LISTEN and announce; `on_lost` runs if the connection dies later."""
        try:
            conn = await asyncpg.connect(dsn, statement_cache_size=0, timeout=5,
                                         server_settings=app_name(dsn, "aiqueue-listen"))
        except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
            raise wrap_error(exc) from exc
        listener = cls(conn)
        try:
            async with asyncio.timeout(cls.ANNOUNCE_TIMEOUT):
                await conn.add_listener(channel, lambda *_: on_notify())
                await listener._announce()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            conn.terminate()
            raise wrap_error(exc) from exc
        conn.add_termination_listener(lambda _conn: on_lost())
        listener._announcer = asyncio.get_running_loop().create_task(listener._keep_announcing())
        return listener

    async def _announce(self) -> None:
        await self._conn.execute(queries()["listening"], 3 * self.ANNOUNCE_EVERY)

    async def _keep_announcing(self) -> None:
        while not self._conn.is_closed():
            await asyncio.sleep(self.ANNOUNCE_EVERY)
            try:
                async with asyncio.timeout(self.ANNOUNCE_TIMEOUT):
                    await self._announce()
            except (OSError, asyncpg.InterfaceError, TimeoutError):
                # Dead or silently dropped: ending it runs on_lost, and the hub
                # polls and opens a new one.
                self._conn.terminate()
            except asyncpg.PostgresError:
                # A refused update only costs streams wake-ups until the next try.
                pass

    @property
    def alive(self) -> bool:
        return not self._conn.is_closed()

    async def close(self) -> None:
        if self._announcer is not None:
            self._announcer.cancel()
        try:
            await self._conn.close(timeout=2)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
            self._conn.terminate()
