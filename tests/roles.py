"""Database roles for the lockdown tests: Supabase's, and a least-privilege runtime role.

Roles belong to the whole server, which parallel test sessions share: they are
made idempotently (two sessions may race to create `anon`), and a runtime role
gets a name of its own per test and is dropped after its database.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from aiqueue.db.embedded import recreate_database
from aiqueue.db.migrate import migrate
from tests import pg

SUPABASE_ROLES = ("anon", "authenticated", "service_role")
_counter = itertools.count()


async def ensure_role(conn: asyncpg.Connection, name: str, options: str = "NOLOGIN") -> None:
    """CREATE ROLE unless it exists; losing a race to another session is fine."""
    if await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", name):
        return
    try:
        await conn.execute(f'CREATE ROLE "{name}" {options}')
    except (asyncpg.DuplicateObjectError, asyncpg.UniqueViolationError):
        pass


async def prepare_like_supabase(conn: asyncpg.Connection) -> None:
    """The roles and default privileges supabase/postgres sets up, before any migration.

    service_role bypasses row-level security there, so only privileges stop it.
    """
    await ensure_role(conn, "anon")
    await ensure_role(conn, "authenticated")
    await ensure_role(conn, "service_role", "NOLOGIN BYPASSRLS")
    roles = ", ".join(SUPABASE_ROLES)
    await conn.execute(f"GRANT USAGE ON SCHEMA public TO {roles}")
    for kind in ("TABLES", "FUNCTIONS", "SEQUENCES"):
        await conn.execute(
            f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON {kind} TO {roles}")


def as_user(dsn: str, role: str, password: str = "") -> str:
    """The same database, logging in as `role`."""
    parts = urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{role}:{password}@{host}"))


@dataclass(frozen=True)
class RuntimeDb:
    """A migrated database, its owner's DSN, and a runtime role's DSN."""

    owner_dsn: str
    runtime_dsn: str
    role: str


@asynccontextmanager
async def runtime_database(admin_dsn: str, *, supabase: bool = False
                           ) -> AsyncIterator[RuntimeDb]:
    """A fresh database migrated by the owner with `--runtime-role` for a new LOGIN role."""
    n = next(_counter)
    role, name = f"aiqueue_rt_{os.getpid()}_{n}", f"aiqueue_rt{os.getpid()}_{n}"
    password = f"pw-{os.getpid()}-{n}"
    admin = await asyncpg.connect(admin_dsn)
    try:
        await ensure_role(admin, role, f"LOGIN PASSWORD '{password}'")
        owner_dsn = await recreate_database(
            admin_dsn, name, template=None if supabase else pg.TEMPLATE)
        if supabase:
            conn = await asyncpg.connect(owner_dsn)
            try:
                await prepare_like_supabase(conn)
            finally:
                await conn.close()
        await migrate(owner_dsn, "up", runtime_role=role)
        yield RuntimeDb(owner_dsn, as_user(owner_dsn, role, password), role)
    finally:
        await recreate_database(admin_dsn, name, create=False)
        await admin.execute(f'DROP ROLE IF EXISTS "{role}"')
        await admin.close()
