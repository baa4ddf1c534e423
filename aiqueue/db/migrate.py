"""Apply and roll back the schema (migrations/) and the SQL functions (db/sql/functions/).

Migrations are numbered up/down pairs that change the schema only.  A
migration may also have preparation steps (`NNNN_name.steps.sql`, see
`prepare`), run before it, each committed on its own, so that the work that
reads a large table is done under a weak lock and the migration's own
transaction holds its strong locks for catalog work only; and statements run
after its commit (`NNNN_name.after.sql`, see `after`), such as an ANALYZE that
reads a sample of every partition.  Every SQL
function and trigger lives, in its current text, in db/sql/functions/: one
file per concern, which `up` re-applies in name order, after the migrations and
in their transaction, whenever their text changed; rolling back the
last migration drops them first.  Every `up` ends with the lockdown
(db/sql/lockdown.sql): only the owner and the runtime role reach the queue.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import asyncpg

from aiqueue.db.gateway import queries
from aiqueue.errors import StoreError
from aiqueue.paths import MIGRATIONS_DIR

# Several instances may start at once; one applies, the others wait and see it done.
_LOCK_KEY = 7301730173017302
# How long an instance waits for another's migration, and how often it asks.
_LOCK_WAIT_SECONDS = 120.0
_LOCK_POLL_SECONDS = 0.2
# A migration's connection that stalls after its work must not hold the start-up.
_CLOSE_SECONDS = 5
_FORGET_FUNCTIONS = "DELETE FROM aiqueue_meta WHERE key = 'functions_sha256'"
log = logging.getLogger("aiqueue.db.migrate")


# The line that starts each preparation step in a `.steps.sql` file.
_STEP = "-- step --"


@dataclass(frozen=True)
class Migration:
    """One numbered migration with its up and down SQL (and its preparation steps)."""

    version: str
    up: Path
    down: Path

    @property
    def steps(self) -> list[str]:
        """Its preparation steps, in order (none without a `.steps.sql` file)."""
        path = self.up.with_name(f"{self.version}.steps.sql")
        if not path.exists():
            return []
        return [s.strip() for s in path.read_text().split(_STEP)[1:] if s.strip()]

    @property
    def after(self) -> str | None:
        """What runs once it is committed (none without a `.after.sql` file)."""
        path = self.up.with_name(f"{self.version}.after.sql")
        return path.read_text() if path.exists() else None


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


@cache
def functions_sql() -> str:
    """The current text of every function and trigger: the folder's files in name order."""
    folder = resources.files("aiqueue.db.sql").joinpath("functions")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return "\n".join(f.read_text() for f in files)


async def _apply_functions(conn: asyncpg.Connection, *, force: bool) -> bool:
    """(Re-)create every function and trigger when their text changed; True if it ran."""
    text = functions_sql()
    digest = hashlib.sha256(text.encode()).hexdigest()
    stored = await conn.fetchval("SELECT value FROM aiqueue_meta WHERE key = 'functions_sha256'")
    if stored == digest and not force:
        return False
    await conn.execute(text)
    await conn.execute(
        "INSERT INTO aiqueue_meta (key, value) VALUES ('functions_sha256', $1)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value", digest)
    return True


async def _drop_functions(conn: asyncpg.Connection) -> None:
    """Drop every aiqueue_* function of this schema (their triggers go with them)."""
    names = await conn.fetch(
        "SELECT p.oid::regprocedure::text AS sig FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = current_schema() AND p.proname LIKE 'aiqueue\\_%'")
    for row in names:
        await conn.execute(f"DROP FUNCTION IF EXISTS {row['sig']} CASCADE")


async def _lockdown(conn: asyncpg.Connection, runtime_role: str | None) -> None:
    """Re-apply who may reach the queue; `runtime_role` replaces the recorded one."""
    await conn.execute("SELECT set_config('aiqueue.runtime_role', $1, true)", runtime_role or "")
    await conn.execute(queries()["lockdown"])


async def may_migrate(dsn: str) -> bool:
    """Whether the role `dsn` logs in as can migrate: it owns the schema's bookkeeping
    (or, on a fresh database, may create in the schema).  The runtime role cannot."""
    conn = await _connect(dsn)
    try:
        return bool(await conn.fetchval(
            "SELECT CASE WHEN to_regclass('aiqueue_migrations') IS NULL"
            " THEN has_schema_privilege(current_schema(), 'CREATE')"
            " ELSE pg_has_role((SELECT relowner FROM pg_class"
            "                   WHERE oid = to_regclass('aiqueue_migrations')), 'USAGE') END"))
    except asyncpg.PostgresError as exc:
        raise StoreError(f"cannot read the schema: {exc.__class__.__name__}") from exc
    finally:
        await conn.close()


async def _connect(dsn: str) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(dsn, statement_cache_size=0, timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StoreError(f"cannot connect to the database: {type(exc).__name__}") from exc


async def _lock(conn: asyncpg.Connection, *, session: bool = False) -> None:
    """Take the migrations' lock (for the transaction, or the session), asking again
    until it is free.

    Asked, not waited for: a session waiting for a lock holds a snapshot, and a
    preparation step's CREATE INDEX CONCURRENTLY in the holder waits for every
    older snapshot to end.
    """
    take = "pg_try_advisory_lock" if session else "pg_try_advisory_xact_lock"
    deadline = time.monotonic() + _LOCK_WAIT_SECONDS
    while not await conn.fetchval(f"SELECT {take}($1)", _LOCK_KEY):
        if time.monotonic() > deadline:
            raise StoreError("another instance's migration has held the lock for "
                             f"{_LOCK_WAIT_SECONDS:.0f} s")
        await asyncio.sleep(_LOCK_POLL_SECONDS)


async def prepare(conn: asyncpg.Connection, steps: int | None) -> int:
    """Run the preparation steps of the migrations `up` is about to apply; how many ran.

    Each step is one statement in a transaction of its own, committed, under the
    migrations' lock (the session's): a `NOT VALID` constraint or its `VALIDATE`,
    or a query whose rows' `statement` column each runs the same way (one
    `CREATE INDEX CONCURRENTLY` per partition).  A step must be idempotent and
    leave a schema the running code works with: the migration may not follow
    (another instance, a failure), and it runs before any earlier migration of
    this run too, so it does nothing where what it prepares is not there yet.
    """
    ran = 0
    # A first look, without the lock (nor creating the bookkeeping table).
    seen: set[str] = set()
    if await conn.fetchval("SELECT to_regclass('aiqueue_migrations')"):
        seen = {r["version"] for r in await conn.fetch("SELECT version FROM aiqueue_migrations")}
    pending = [m for m in discover() if m.version not in seen][:steps]
    if not any(m.steps for m in pending):
        return 0
    await _lock(conn, session=True)
    await conn.execute("SET statement_timeout = '15min'; SET lock_timeout = '2min'")
    try:
        applied = await _applied(conn)
        for m in [m for m in pending if m.version not in applied]:
            for step in m.steps:
                for row in await conn.fetch(step):
                    log.info("migration %s prepares: %s", m.version, row["statement"][:120])
                    await conn.execute(row["statement"])
                ran += 1
    finally:
        await conn.execute("RESET statement_timeout; RESET lock_timeout")
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return ran


async def after(conn: asyncpg.Connection, done: list[str]) -> None:
    """Run the after-commit statements of the migrations `up` just applied.

    They need no lock the app's reads and writes wait for (an ANALYZE); one that
    fails is logged and left: the migration stands.
    """
    for m in discover():
        if m.version in done and m.after:
            try:
                await conn.execute(m.after)
            except asyncpg.PostgresError as exc:
                log.warning("migration %s: its after-commit statements failed (%s)",
                            m.version, exc.__class__.__name__)


async def _up(conn: asyncpg.Connection, applied: list[str], steps: int | None) -> list[str]:
    known = discover()
    todo = [m for m in known if m.version not in applied][:steps]
    for m in todo:
        await conn.execute(m.up.read_text())
        await conn.execute("INSERT INTO aiqueue_migrations (version) VALUES ($1)", m.version)
    # Functions need the whole schema: after a partial `--steps` run they wait
    # for the run that completes it.
    if known and len(applied) + len(todo) == len(known):
        await _apply_functions(conn, force=bool(todo))
    return [m.version for m in todo]


async def _down(conn: asyncpg.Connection, applied: list[str], steps: int | None) -> list[str]:
    todo = [m for m in reversed(discover()) if m.version in applied][: steps or 1]
    for m in todo:
        if m.version == applied[0]:
            await _drop_functions(conn)
        else:
            # The next `up` re-creates them, whatever their text.
            await conn.execute(_FORGET_FUNCTIONS)
        await conn.execute(m.down.read_text())
        await conn.execute("DELETE FROM aiqueue_migrations WHERE version = $1", m.version)
    return [m.version for m in todo]


async def migrate(dsn: str, direction: str = "up", *, steps: int | None = None,
                  runtime_role: str | None = None) -> list[str]:
    """Apply pending migrations (or roll back the newest); return the versions touched.

    `up` always ends with the lockdown; `runtime_role` (up only) is granted
    what the app needs and recorded, so later runs keep it.
    """
    conn = await _connect(dsn)
    try:
        if direction == "up":
            await prepare(conn, steps)
        async with conn.transaction():
            # Migrations keep their own, longer limits than the app's calls (db/calls.py).
            await conn.execute("SET LOCAL statement_timeout = '15min'; "
                               "SET LOCAL lock_timeout = '2min'")
            await _lock(conn)
            applied = await _applied(conn)
            if direction != "up":
                return await _down(conn, applied, steps)
            done = await _up(conn, applied, steps)
            await _lockdown(conn, runtime_role)
        await after(conn, done)
        return done
    except asyncpg.PostgresError as exc:
        raise StoreError(f"migration failed: {exc.__class__.__name__}: {exc}") from exc
    finally:
        await _close(conn)


async def _close(conn: asyncpg.Connection) -> None:
    """Close politely within a few seconds; a connection that does not answer is cut."""
    try:
        await conn.close(timeout=_CLOSE_SECONDS)
    except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        conn.terminate()
