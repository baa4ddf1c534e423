"""What every query gateway shares: the named SQL blocks, the pool, bounded calls."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

import asyncpg

from aiqueue.db.calls import Database, Work, open_database
from aiqueue.db.pool import Limits
from aiqueue.db.prepared import Choice
from aiqueue.settings.env import PreparedStatements

_HEADER = re.compile(r"^-- ([a-z_]+) --$", re.MULTILINE)


@cache
def queries() -> dict[str, str]:
    """Split every sql/*.sql file into {name: statement}."""
    found: dict[str, str] = {}
    files = sorted(
        (f for f in resources.files("aiqueue.db.sql").iterdir() if f.name.endswith(".sql")),
        key=lambda f: f.name,
    )
    for file in files:
        parts = _HEADER.split(file.read_text())[1:]
        for name, body in zip(parts[::2], parts[1::2], strict=True):
            if name in found:
                raise RuntimeError(f"query {name!r} is defined twice")
            found[name] = body.strip()
    return found


async def connect_pool(dsn: str, *, max_size: int = 4, limits: Limits | None = None,
                       prepared: PreparedStatements = "auto") -> Database:
    """The instance's bounded connection pool (also works through a transaction pooler:
    `prepared` statements where the connection keeps them, db/prepared.py)."""
    return await open_database(dsn, max_size=max_size, limits=limits, prepared=prepared)


class Gateway:
    """Runs named queries on the bounded pool (db/calls.py): reads, writes, per-job writes."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.sql = queries()

    def _rows_of(self, name: str, args: tuple[Any, ...]) -> Work[list[asyncpg.Record]]:
        """The work of running a named statement and returning all its rows."""
        async def work(conn: asyncpg.Connection) -> list[asyncpg.Record]:
            rows: list[asyncpg.Record] = await conn.fetch(self.sql[name], *args)
            return rows
        return work

    async def _fetch(self, name: str, *args: Any, page: bool = False) -> list[asyncpg.Record]:
        return await self.db.read(self._rows_of(name, args), page=page)

    async def _fetchrow(self, name: str, *args: Any, page: bool = False) -> asyncpg.Record | None:
        async def work(conn: asyncpg.Connection) -> asyncpg.Record | None:
            row: asyncpg.Record | None = await conn.fetchrow(self.sql[name], *args)
            return row
        return await self.db.read(work, page=page)

    async def _fetchval(self, name: str, *args: Any, page: bool = False) -> Any:
        async def work(conn: asyncpg.Connection) -> Any:
            return await conn.fetchval(self.sql[name], *args)
        return await self.db.read(work, page=page)

    async def _write(
        self, name: str, *args: Any, page: bool = False, idempotent: bool = False
    ) -> list[asyncpg.Record]:
        """A statement that changes rows, in a transaction with server-side limits."""
        return await self.db.write(self._rows_of(name, args), page=page, idempotent=idempotent)

    async def _write_val(self, name: str, *args: Any, page: bool = False,
                         idempotent: bool = False) -> Any:
        rows = await self._write(name, *args, page=page, idempotent=idempotent)
        return rows[0][0] if rows else None

    async def _write_one(self, name: str, *args: Any) -> list[asyncpg.Record]:
        """An idempotent statement of the per-job path, alone (db/calls.py `write_one`)."""
        return await self.db.write_one(self._rows_of(name, args))

    async def close(self) -> None:
        await self.db.pool.close()

    def prepared_statements(self) -> Choice | None:
        """Whether this pool's connections keep prepared statements, and why (None: no
        connection has asked the server yet)."""
        return self.db.pool.prepared

    async def ping(self) -> bool:
        return bool(await self._fetchval("ping"))
