"""Apply and roll back the SQL files in migrations/ (NNNN_name.up.sql / .down.sql)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from aiqueue.errors import StoreError

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
# Several instances may start at once; one applies, the others wait and see it done.
_LOCK_KEY = 7301730173017302
log = logging.getLogger("aiqueue.migrate")


@dataclass(frozen=True)
class Migration:
    """One numbered migration with its up and down SQL."""

    version: str
    up: Path
    down: Path


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Every migration in version order; each must have both halves."""
    found = []
    for up in sorted(directory.glob("*.up.sql")):
        version = up.name.removesuffix(".up.sql")
        down = up.with_name(f"{version}.down.sql")
        if not down.exists():
            raise StoreError(f"migration {version} has no down migration")
        found.append(Migration(version, up, down))
    return found


async def _applied(conn: asyncpg.Connection) -> list[str]:
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS aiqueue_migrations ("
        " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    rows = await conn.fetch("SELECT version FROM aiqueue_migrations ORDER BY version")
    return [r["version"] for r in rows]


async def migrate(dsn: str, direction: str = "up", *, steps: int | None = None) -> list[str]:
    """Apply pending migrations (or roll back the newest); return the versions touched."""
    try:
        conn = await asyncpg.connect(dsn, statement_cache_size=0)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StoreError(f"cannot connect to the database: {type(exc).__name__}") from exc
    touched: list[str] = []
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
            applied = await _applied(conn)
            known = discover()
            if direction == "up":
                todo = [m for m in known if m.version not in applied][:steps]
                for m in todo:
                    await conn.execute(m.up.read_text())
                    await conn.execute("INSERT INTO aiqueue_migrations (version) VALUES ($1)",
                                       m.version)
                    touched.append(m.version)
            else:
                todo = [m for m in reversed(known) if m.version in applied][: steps or 1]
                for m in todo:
                    await conn.execute(m.down.read_text())
                    await conn.execute("DELETE FROM aiqueue_migrations WHERE version = $1",
                                       m.version)
                    touched.append(m.version)
    except asyncpg.PostgresError as exc:
        raise StoreError(f"migration failed: {exc.__class__.__name__}: {exc}") from exc
    finally:
        await conn.close()
    return touched
