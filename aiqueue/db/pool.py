"""A small pool of database connections that never reuses one it cannot trust
(the bounded calls on it: db/calls.py).

A connection that failed or timed out is thrown away with its idle siblings.

Why not asyncpg.Pool: three of its waits have no bound, and each is a way a
dead connection (a NAT that forgot it, a hung pooler, a thawed instance) holds
a request or the whole queue forever:
- releasing a connection whose query was cancelled waits for the cancellation
  without a time limit (asyncpg#431, "infinite hang on release");
- when a `setup` callback fails, the pool closes the connection gracefully
  (`await con.close()`, no timeout), which waits on the dead socket;
- its idle check (`max_inactive_connection_lifetime`) runs on the event loop's
  monotonic clock, which may not advance while the process or its VM is
  frozen, so after a thaw it hands out connections that died meanwhile.
Here every wait sits inside the call's deadline, a broken connection is
terminated (never closed politely), and idleness counts the wall clock too.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import asyncpg

from aiqueue import logs
from aiqueue.db import prepared as prepared_statements
from aiqueue.errors import StoreError
from aiqueue.settings.env import PreparedStatements

# Errors after which the connection itself is suspect (as opposed to a statement
# the server refused on a healthy connection).
BROKEN = (
    TimeoutError, OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError, asyncpg.CrashShutdownError, asyncpg.CannotConnectNowError,
)


@dataclass(frozen=True)
class Limits:
    """How long each kind of call may take (seconds, per attempt)."""

    hot: float = 3.0  # claim, settle, enqueue, status reads: the chain and the teacher's click
    page: float = 4.5  # the operator's pages; two attempts still answer within 10 s
    connect: float = 3.0  # a new connection, part of the call's deadline as well
    check_idle_after: float = 5.0  # a connection idle this long is pinged before use
    ping: float = 1.0
    max_idle: float = 60.0  # idle longer than this: closed rather than kept

    def begin(self, budget: float) -> str:
        """BEGIN with server-side limits a little inside the client's deadline (one round trip)."""
        ms = int(budget * 1000)
        return (f"BEGIN; SET LOCAL statement_timeout = {int(ms * 0.8)}; "
                f"SET LOCAL lock_timeout = {int(ms * 0.6)}; "
                # A transaction whose client vanished must not hold its locks long.
                f"SET LOCAL idle_in_transaction_session_timeout = {ms}")


class ConnPool:
    """At most `max_size` connections; the idle ones are reused newest first."""

    def __init__(self, dsn: str, max_size: int, limits: Limits,
                 prepared: PreparedStatements = "off") -> None:
        self.dsn, self.max_size, self.limits = dsn, max_size, limits
        self._slots = asyncio.Semaphore(max_size)
        # (connection, monotonic and wall-clock time it went idle)
        self._idle: list[tuple[asyncpg.Connection, float, float]] = []
        self._closed = False
        self._settings = app_name(dsn, "aiqueue")
        # Prepared statements kept per connection, or not (db/prepared.py); None
        # until the first connection asked the server (`auto`).
        self.mode = prepared
        self.prepared = prepared_statements.by_url(prepared, dsn)
        # Connections opened with a statement cache (closed once `auto` turns it off).
        self._caching: set[asyncpg.Connection] = set()

    async def connect(self) -> asyncpg.Connection:
        # No session state: PgBouncer/Supavisor in transaction mode may hand each
        # transaction a different backend (so no statement cache there either).
        choice = self.prepared
        conn: asyncpg.Connection = await asyncpg.connect(
            self.dsn, statement_cache_size=choice.cache_size if choice else 0,
            timeout=self.limits.connect, server_settings=self._settings)
        if choice is None:
            try:
                self.prepared = await prepared_statements.ask_server(conn, self.dsn)
            except BaseException:
                conn.terminate()
                raise
            if self.prepared.on:
                conn.terminate()  # this one was opened without the cache
                return await self.connect()
        elif choice.on:
            self._caching.add(conn)
        return conn

    def stop_preparing(self) -> bool:
        """After a lost prepared statement: in `auto`, turn them off for the pool (logged
        once, the doctor shows why), drop the connections that keep them, and say the
        call may run again; with DATABASE_PREPARED_STATEMENTS=on, False (taken as said)."""
        if self.mode != "auto":
            return False
        if self.prepared is None or self.prepared.on:
            self.prepared = prepared_statements.LOST
            self.discard_idle()
            logs.event("database", outcome="prepared_off")
        return True

    async def acquire(self) -> asyncpg.Connection:
        await self._slots.acquire()
        try:
            return await self._take_idle() or await self.connect()
        except BaseException:
            self._slots.release()
            raise

    def release(self, conn: asyncpg.Connection, *, reusable: bool) -> None:
        self._slots.release()
        stale_cache = conn in self._caching and not (self.prepared and self.prepared.on)
        if reusable and not stale_cache and not self._closed and not conn.is_closed() \
                and not conn.is_in_transaction():
            self._idle.append((conn, time.monotonic(), time.time()))
        else:
            self._caching.discard(conn)
            conn.terminate()

    def discard_idle(self) -> None:
        """Drop every idle connection: one died, the rest may have died with it."""
        idle, self._idle = self._idle, []
        for conn, _, _ in idle:
            self._caching.discard(conn)
            conn.terminate()

    async def _take_idle(self) -> asyncpg.Connection | None:
        while self._idle:
            conn, mono, wall = self._idle.pop()
            # The wall clock also counts time the process or its VM was frozen,
            # which the monotonic clock may not.
            idle = max(time.monotonic() - mono, time.time() - wall)
            if conn.is_closed():
                continue
            if idle > self.limits.max_idle:
                conn.terminate()
            elif idle <= self.limits.check_idle_after or await self._answers(conn):
                return conn
        return None

    async def _answers(self, conn: asyncpg.Connection) -> bool:
        """One cheap round trip under a short limit (after a thaw it may be dead)."""
        try:
            async with asyncio.timeout(self.limits.ping):
                await conn.execute("SELECT 1")
            return True
        except (*BROKEN, asyncpg.PostgresError):
            conn.terminate()
            self.discard_idle()
            logs.event("database", outcome="stale_connection")
            return False

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn, _, _ in idle:
            try:
                await conn.close(timeout=2)
            except (*BROKEN, asyncpg.PostgresError):
                conn.terminate()


def app_name(dsn: str, name: str) -> dict[str, str]:
    """Server settings naming our sessions in pg_stat_activity, unless the URL names them."""
    return {} if "application_name" in parse_qs(urlsplit(dsn).query) else {
        "application_name": name}


def wrap_error(exc: BaseException) -> StoreError:
    """A database failure as a StoreError naming only the exception's type."""
    return StoreError(f"database error: {type(exc).__name__}")
