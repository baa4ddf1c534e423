"""The database side of the doctor: the schema version, probe answers, and
what a connection URL really leads to (a transaction pooler? does LISTEN work there?)."""

from __future__ import annotations

import asyncio
import functools
import json
import secrets
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from aiqueue.db.gateway import Gateway, queries
from aiqueue.db.migrate import discover
from aiqueue.db.pool import app_name, wrap_error
from aiqueue.db.prepared import known_pooler_url
from aiqueue.errors import StoreError
from aiqueue.models.records import HostFill, MonthsAhead, TableHealth


class DoctorQueries(Gateway):
    """The schema version and the probe answers, on the instance's bounded pool."""

    async def schema_version(self) -> int | None:
        """The newest migration number applied (0: never migrated; None: this role may not
        read the migrations table, so the version is unknown)."""
        async def work(conn: asyncpg.Connection) -> int | None:
            try:
                return int(await conn.fetchval(self.sql["schema_version"]))
            except asyncpg.UndefinedTableError:
                return 0
            except asyncpg.InsufficientPrivilegeError:
                return None
        return await self.db.read(work)

    async def unknown_zones(self, names: list[str]) -> list[str]:
        """Of the zone names, those the database does not know (pg_timezone_names)."""
        return [r["zone"] for r in await self._fetch("unknown_zones", names)]

    async def prompt_prefixes(self) -> dict[str, tuple[int, float]]:
        """Per pool, the prompt prefixes of the last week: (how many, their middle size in
        tokens)."""
        rows = await self._fetch("prompt_prefixes")
        return {r["pool"]: (int(r["prefixes"]), float(r["tokens"])) for r in rows}

    async def months_ahead(self) -> list[MonthsAhead]:
        """Per partitioned history table: is next month's partition there (97_partitions.sql)."""
        return [MonthsAhead.from_row(r) for r in await self._fetch("months_ahead")]

    async def table_health(self) -> list[TableHealth]:
        """Dead rows and HOT updates of the record (and the state tables, when they exist)."""
        return [TableHealth.from_row(r) for r in await self._fetch("table_health")]

    async def submissions_fill(self) -> HostFill | None:
        """The host's submissions: its fillfactor and its updates (None: no such table)."""
        row = await self._fetchrow("submissions_fill")
        return HostFill.from_row(row) if row else None

    async def record_probe_answer(self, probe_id: UUID, answer: str,
                                  detail: dict[str, Any]) -> bool:
        """Keep the first answer to a probe; True if this one was the first."""
        return await self._write_one_status("record_probe_answer", probe_id, answer,
                                            json.dumps(detail))

    async def _write_one_status(self, name: str, *args: Any) -> bool:
        async def work(conn: asyncpg.Connection) -> bool:
            status: str = await conn.execute(self.sql[name], *args)
            return status.endswith(" 1")
        return await self.db.write_one(work)

    async def probe_answer(self, probe_id: UUID) -> tuple[str, dict[str, Any]] | None:
        """What the function answered to a probe, or None while nothing came."""
        row = await self._fetchrow("probe_answer", probe_id)
        return None if row is None else (row["answer"], json.loads(row["detail"]))

    async def prune_probe_answers(self) -> None:
        await self._write_one_status("prune_probe_answers")

    async def cron_called(self) -> None:
        """Keep the time of this cron call in the control row (at most every 10 s)."""
        await self._write_one_status("cron_called")

    async def cron_last_call(self) -> float | None:
        """Seconds since the cron last called; None when it never has."""
        value = await self._fetchval("cron_last_call")
        return None if value is None else float(value)


@dataclass(frozen=True)
class PoolerFinding:
    """What a URL leads to: `pooled` with the evidence, and the server's real port."""

    pooled: bool
    evidence: str
    server_port: int | None = None


async def _connect(dsn: str, name: str) -> asyncpg.Connection:
    try:
        conn: asyncpg.Connection = await asyncpg.connect(
            dsn, statement_cache_size=0, timeout=5, server_settings=app_name(dsn, name))
        return conn
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        raise StoreError(f"cannot connect: {type(exc).__name__}") from exc


async def detect_pooler(dsn: str) -> PoolerFinding:
    """Two client connections: does session state or a backend leak from one to the other?

    On a session connection each client has its own backend for its whole life, so
    neither can happen.  A transaction pooler hands an idle backend to the next
    transaction of any client (PgBouncer reuses the most recent one first).
    """
    a = await _connect(dsn, "aiqueue-doctor")
    try:
        b = await _connect(dsn, "aiqueue-doctor")
        try:
            return await _compare(a, b, dsn)
        finally:
            await b.close(timeout=2)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        raise wrap_error(exc) from exc
    finally:
        await a.close(timeout=2)


async def _compare(a: asyncpg.Connection, b: asyncpg.Connection, dsn: str) -> PoolerFinding:
    sql = queries()
    mark = secrets.token_hex(8)
    async with asyncio.timeout(10):
        await a.fetchval(sql["doctor_mark_session"], mark)
        first = await a.fetchrow(sql["doctor_backend_pid"])
        seen = await b.fetchval(sql["doctor_read_mark"])
        other = await b.fetchrow(sql["doctor_backend_pid"])
        # Hold b's backend in a transaction: a's next statement must then find
        # another backend if its session was never its own.
        async with b.transaction():
            await b.fetchval(sql["doctor_backend_pid"])
            again = await a.fetchrow(sql["doctor_backend_pid"])
        await a.fetchval(sql["doctor_mark_session"], "")
        await b.fetchval(sql["doctor_mark_session"], "")
    port = first["port"]
    if seen == mark:
        return PoolerFinding(True, "a session setting of one connection showed up in another",
                             port)
    if other["pid"] == first["pid"]:
        return PoolerFinding(True, "two connections shared one server backend", port)
    if again["pid"] != first["pid"]:
        return PoolerFinding(True, "one connection moved between server backends", port)
    if known_pooler_url(dsn):
        return PoolerFinding(True, "the URL is a managed transaction pooler's endpoint", port)
    return PoolerFinding(False, "each connection kept its own server backend", port)


async def listen_works(listen_dsn: str, notify_dsn: str, timeout: float = 5.0) -> bool:
    """LISTEN on `listen_dsn`, NOTIFY through `notify_dsn`: does the notification arrive?"""
    channel = f"aiqueue_doctor_{secrets.token_hex(6)}"
    payload = secrets.token_hex(8)
    heard = asyncio.Event()

    def on_notify(*args: object) -> None:
        if args and args[-1] == payload:
            heard.set()

    listener = await _connect(listen_dsn, "aiqueue-doctor-listen")
    try:
        await listener.add_listener(channel, on_notify)
        sender = await _connect(notify_dsn, "aiqueue-doctor")
        try:
            await sender.fetchval(queries()["doctor_notify"], channel, payload)
        finally:
            await sender.close(timeout=2)
        try:
            async with asyncio.timeout(timeout):
                await heard.wait()
            return True
        except TimeoutError:
            return False
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise wrap_error(exc) from exc
    finally:
        listener.terminate()


def code_schema_version() -> int:
    """The newest migration this code ships (the schema it needs)."""
    return _code_version()


@functools.cache
def _code_version() -> int:
    return max((int(m.version.split("_", 1)[0]) for m in discover()), default=0)
