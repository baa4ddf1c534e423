"""Bounded database calls on the pool (db/pool.py).

Every call has a deadline (the client's).  Writes run in one transaction whose
server-side limits are set with SET LOCAL just under that deadline, so the
server gives up first and nothing half-done is left behind; only the per-job
idempotent statements run alone (see `Database.write_one`).  After a broken
connection the call runs once more on a fresh one where that is safe, and after
a row it locked was moved under it (below) it runs again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

from aiqueue import logs
from aiqueue.db.pool import BROKEN, ConnPool, Limits, wrap_error
from aiqueue.errors import DatabaseTimeout, StoreError
from aiqueue.settings.env import PreparedStatements

T = TypeVar("T")
Work = Callable[[asyncpg.Connection], Awaitable[T]]

# The server's own limits (statement_timeout, lock_timeout) fired: a clean refusal.
_SERVER_TIMEOUT = (asyncpg.QueryCanceledError, asyncpg.LockNotAvailableError)
# A prepared statement missing from, or already on, the backend the statement reached:
# a transaction pooler handed the connection another client's backend.  Raised before
# the statement ran (a write's transaction is rolled back), so the call may run again.
_LOST_STATEMENT = (asyncpg.InvalidSQLStatementNameError,
                   asyncpg.DuplicatePreparedStatementError)
# A record row this call waited for was moved to another partition by the
# transaction it waited on (a row's end moves it from the live table to its
# month, a retry moves it back: docs/architecture.md, "The record").  PostgreSQL
# then refuses the statement (40001) where an unmoved row would have been read
# again; nothing of the call was kept, so it runs again and finds the row where
# it is now.  Twice at most: a row moves once per end or retry.
_MOVED_RUNS = 2


class Rollback(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a write's work: undo the transaction and return `value` from the call."""

    def __init__(self, value: object) -> None:
        super().__init__("rollback")
        self.value = value


class Database:
    """Runs work on a pooled connection with a deadline, a transaction and one safe retry."""

    def __init__(self, pool: ConnPool) -> None:
        self.pool = pool
        self.limits = pool.limits

    async def read(self, work: Work[T], *, page: bool = False) -> T:
        """A read: one round trip, retried once on a fresh connection if the first broke."""
        budget = self.limits.page if page else self.limits.hot
        return await self._call(work, budget, write=False, idempotent=True)

    async def write(self, work: Work[T], *, page: bool = False, idempotent: bool = False) -> T:
        """A transaction; retried when it broke before COMMIT was sent, or if `idempotent`."""
        budget = self.limits.page if page else self.limits.hot
        return await self._call(work, budget, write=True, idempotent=idempotent)

    async def write_one(self, work: Work[T]) -> T:
        """One idempotent statement on its own (autocommit), for the per-job path.

        BEGIN/SET LOCAL/COMMIT would double its round trips.  A single statement
        never leaves a transaction open to hold locks between round trips, and
        being idempotent, one the server finishes after the client gave up
        changes nothing the retry would not.
        """
        return await self._call(work, self.limits.hot, write=False, idempotent=True)

    async def _call(self, work: Work[T], budget: float, *, write: bool, idempotent: bool) -> T:
        attempts, lost_once, moved_runs = [1, 2], False, _MOVED_RUNS
        while attempts:
            attempt = attempts.pop(0)
            sent_commit: list[bool] = [False]
            try:
                return await self._once(work, budget, write, sent_commit)
            except BROKEN as exc:
                self.pool.discard_idle()
                if attempt == 2 or (sent_commit[0] and not idempotent):
                    raise _unavailable(exc) from exc
                logs.event("database", outcome="retry", code=type(exc).__name__)
            except _SERVER_TIMEOUT as exc:
                raise DatabaseTimeout("the database did not answer in time") from exc
            except asyncpg.SerializationError as exc:
                if moved_runs == 0:
                    raise wrap_error(exc) from exc
                moved_runs -= 1
                logs.event("database", outcome="again", code=type(exc).__name__)
                attempts.insert(0, attempt)
            except _LOST_STATEMENT as exc:
                # Once per call, and not counted: the request is answered as if nothing
                # happened, on a connection without prepared statements.
                if lost_once or not self.pool.stop_preparing():
                    raise wrap_error(exc) from exc
                lost_once = True
                attempts.insert(0, attempt)
            except asyncpg.PostgresError as exc:
                raise wrap_error(exc) from exc
        raise AssertionError("unreachable")

    async def _once(self, work: Work[T], budget: float, write: bool,
                    sent_commit: list[bool]) -> T:
        conn: asyncpg.Connection | None = None
        healthy = False
        try:
            async with asyncio.timeout(budget):
                conn = await self.pool.acquire()
                if not write:
                    result = await work(conn)
                else:
                    await conn.execute(self.limits.begin(budget))
                    try:
                        result = await work(conn)
                    except Rollback as rollback:
                        await conn.execute("ROLLBACK")
                        healthy = True
                        return rollback.value  # type: ignore[return-value]
                    except asyncpg.PostgresError as exc:
                        if not isinstance(exc, BROKEN):
                            await conn.execute("ROLLBACK")
                        raise
                    sent_commit[0] = True
                    await conn.execute("COMMIT")
            healthy = True
            return result
        except asyncpg.PostgresError as exc:
            healthy = not isinstance(exc, BROKEN)
            raise
        finally:
            if conn is not None:
                self.pool.release(conn, reusable=healthy)


def _unavailable(exc: BaseException) -> StoreError:
    if isinstance(exc, TimeoutError):
        return DatabaseTimeout("the database did not answer in time")
    return wrap_error(exc)


async def open_database(dsn: str, *, max_size: int, limits: Limits | None = None,
                        prepared: PreparedStatements = "off") -> Database:
    """A pool with one connection opened now, so a wrong DATABASE_URL shows at start-up
    (and `prepared`'s choice is made: db/prepared.py)."""
    pool = ConnPool(dsn, max_size, limits or Limits(), prepared)
    try:
        conn = await pool.acquire()
    except (*BROKEN, asyncpg.PostgresError) as exc:
        raise StoreError(f"cannot connect to the database: {type(exc).__name__}") from exc
    pool.release(conn, reusable=True)
    return Database(pool)
