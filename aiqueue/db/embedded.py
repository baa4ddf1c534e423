"""An embedded PostgreSQL (the pgserver wheel) for dev and tests when DATABASE_URL is unset."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from aiqueue.errors import SettingsError
from aiqueue.settings import Settings

DEFAULT_DIR = Path(".data") / "pg"


def database_for(settings: Settings) -> tuple[Settings, Any]:
    """Use DATABASE_URL, or start the embedded server (dev only) and point at it."""
    if settings.database_url:
        return settings, None
    dsn, handle = start_embedded()
    return settings.with_overrides(database_url=dsn, database_direct_url=dsn,
                                   embedded_database=True), handle


def start_embedded(directory: Path = DEFAULT_DIR) -> tuple[str, Any]:
    """Start (or join) the embedded server under `directory`; return (dsn, handle)."""
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError:
        raise SettingsError(
            "DATABASE_URL is unset and the embedded PostgreSQL (pip install pgserver) is missing"
        ) from None
    directory.mkdir(parents=True, exist_ok=True)
    get_server = pgserver.get_server  # type: ignore[attr-defined]
    server = get_server(directory.resolve(), cleanup_mode="stop")
    return str(server.get_uri()), server


def with_database(dsn: str, name: str) -> str:
    """The same server, another database."""
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


async def recreate_database(admin_dsn: str, name: str, *, template: str | None = None,
                            create: bool = True) -> str:
    """Drop `name` (forcing sessions off) and, unless `create` is False, create it anew.

    For tests and benchmarks: `name` and `template` are our own identifiers.
    """
    import asyncpg

    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if create:
            copy = f" TEMPLATE {template}" if template else ""
            await conn.execute(f"CREATE DATABASE {name}{copy}")
    finally:
        await conn.close()
    return with_database(admin_dsn, name)
