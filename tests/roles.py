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
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from aiqueue.db.embedded import recreate_database
from aiqueue.db.migrate import migrate
from tests import pg

# The API roles: what PostgREST logs in as for the site's public key, a signed-in
# user and the service key.  Supabase's default privileges hand them ALL in public.
SUPABASE_ROLES = ("anon", "authenticated", "service_role")
# The platform's own: a superuser, and BYPASSRLS members of pg_read_all_data.
SUPABASE_PLATFORM = ("supabase_admin", "supabase_read_only_user", "supabase_etl_admin")
NEON_SUPERUSER = "neon_superuser"
_counter = itertools.count()


async def ensure_role(conn: asyncpg.Connection, name: str, options: str = "NOLOGIN") -> None:
    """CREATE ROLE unless it exists; losing a race to another session is fine."""
    if await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", name):
        return
    try:
        await conn.execute(f'CREATE ROLE "{name}" {options}')
    except (asyncpg.DuplicateObjectError, asyncpg.UniqueViolationError):
        pass


async def ensure_member(conn: asyncpg.Connection, group: str, member: str) -> None:
    """GRANT group TO member, tolerating another session doing it at the same time."""
    try:
        await conn.execute(f'GRANT "{group}" TO "{member}"')
    except (asyncpg.DuplicateObjectError, asyncpg.UniqueViolationError,
            asyncpg.InternalServerError):
        pass


async def prepare_like_supabase(conn: asyncpg.Connection, owner: str | None = None) -> None:
    """The roles and default privileges supabase/postgres sets up, before any migration.

    `conn` is a superuser's, on the new database.  supabase_admin is a superuser;
    supabase_read_only_user and supabase_etl_admin have BYPASSRLS and
    pg_read_all_data; service_role bypasses row-level security, so only
    privileges stop it; authenticator (NOINHERIT) logs in and switches to the
    API roles.  The default privileges are those of `owner` (the role that will
    run `migrate up`), or of the connected role.
    """
    await ensure_role(conn, "supabase_admin", "NOLOGIN SUPERUSER")
    for name in ("supabase_read_only_user", "supabase_etl_admin"):
        await ensure_role(conn, name, "NOLOGIN BYPASSRLS")
        await ensure_member(conn, "pg_read_all_data", name)
    await ensure_role(conn, "anon")
    await ensure_role(conn, "authenticated")
    await ensure_role(conn, "service_role", "NOLOGIN BYPASSRLS")
    await ensure_role(conn, "authenticator", "NOLOGIN NOINHERIT")
    for api_role in SUPABASE_ROLES:
        await ensure_member(conn, api_role, "authenticator")
    roles = ", ".join(SUPABASE_ROLES)
    await conn.execute(f"GRANT USAGE ON SCHEMA public TO {roles}")
    whose = f' FOR ROLE "{owner}"' if owner else ""
    for kind in ("TABLES", "FUNCTIONS", "SEQUENCES"):
        await conn.execute(
            f"ALTER DEFAULT PRIVILEGES{whose} IN SCHEMA public GRANT ALL ON {kind} TO {roles}")


async def prepare_like_neon(conn: asyncpg.Connection) -> None:
    """Neon's neon_superuser: no superuser, but it reads and writes every table."""
    await ensure_role(conn, NEON_SUPERUSER, "NOLOGIN CREATEDB CREATEROLE BYPASSRLS")
    for wide in ("pg_read_all_data", "pg_write_all_data"):
        await ensure_member(conn, wide, NEON_SUPERUSER)


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
    # A superuser's DSN on the same database, and the owner's role name.
    admin_dsn: str = ""
    owner: str = "postgres"


Platform = Literal["supabase", "neon"]


@asynccontextmanager
async def runtime_database(admin_dsn: str, *, supabase: bool = False,
                           platform: Platform | None = None, host_sql: str = ""
                           ) -> AsyncIterator[RuntimeDb]:
    """A fresh database migrated by its owner with `--runtime-role` for a new LOGIN role.

    Without a platform it is copied from the migrated template (owner: the
    superuser).  With one (`supabase=True` is `platform="supabase"`), it is
    prepared as that platform prepares a new project, all before migrating: the
    database and its public schema belong to a LOGIN role that is no superuser
    (Supabase's `postgres`; on Neon a member of neon_superuser, as roles made in
    its console are), the platform's roles and default privileges exist, and the
    host's own objects (`host_sql`, run as the owner) are in place.
    """
    platform = platform or ("supabase" if supabase else None)
    n = next(_counter)
    role, name = f"aiqueue_rt_{os.getpid()}_{n}", f"aiqueue_rt{os.getpid()}_{n}"
    owner = f"aiqueue_own_{os.getpid()}_{n}" if platform else "postgres"
    password = f"pw-{os.getpid()}-{n}"
    admin = await asyncpg.connect(admin_dsn)
    try:
        await ensure_role(admin, role, f"LOGIN PASSWORD '{password}'")
        if platform is None:
            owner_dsn = await recreate_database(admin_dsn, name, template=pg.TEMPLATE)
            db_admin = owner_dsn
        else:
            await ensure_role(admin, owner, f"LOGIN PASSWORD '{password}'")
            db_admin = await recreate_database(admin_dsn, name)
            await admin.execute(f'ALTER DATABASE {name} OWNER TO "{owner}"')
            owner_dsn = as_user(db_admin, owner, password)
            await _prepare(db_admin, platform, owner)
            if host_sql:
                host = await asyncpg.connect(owner_dsn)
                try:
                    await host.execute(host_sql)
                finally:
                    await host.close()
        await migrate(owner_dsn, "up", runtime_role=role)
        yield RuntimeDb(owner_dsn, as_user(owner_dsn, role, password), role, db_admin, owner)
    finally:
        await recreate_database(admin_dsn, name, create=False)
        await admin.execute(f'DROP ROLE IF EXISTS "{role}"')
        if owner != "postgres":
            await admin.execute(f'DROP ROLE IF EXISTS "{owner}"')
        await admin.close()


async def _prepare(db_admin: str, platform: Platform, owner: str) -> None:
    conn = await asyncpg.connect(db_admin)
    try:
        # PostgreSQL 15+ gives public to the database's owner; 14 to PUBLIC.
        await conn.execute(f'ALTER SCHEMA public OWNER TO "{owner}"')
        if platform == "supabase":
            await prepare_like_supabase(conn, owner)
        else:
            await prepare_like_neon(conn)
            # As Neon's console makes a role: BYPASSRLS and a member of neon_superuser,
            # so one of the platform's own (it never shows in another database's check).
            await conn.execute(f'ALTER ROLE "{owner}" BYPASSRLS')
            await ensure_member(conn, NEON_SUPERUSER, owner)
    finally:
        await conn.close()
