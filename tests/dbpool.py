"""Test databases used again: a migrated copy of the template, put back to the template's state.

Creating a database from the template and dropping it costs about half a second a
test; putting a used one back costs a few hundredths.  Before each use, every session
on the database is ended and it gets a new name (a client a test left behind cannot
reach the next test's database); every table a test wrote into is emptied by TRUNCATE,
the rows the migrations wrote are copied back from the template's snapshot, and every
sequence is set to the template's value.  Then its catalog (every object, privilege,
setting and statistic of its own) is compared with the template's: if a test changed
anything there (DDL, GRANT, ALTER DATABASE, ANALYZE), the database is dropped and a
fresh copy takes its place.  Tests that change the catalog on purpose say
`pytest.mark.fresh_db` and skip the pool.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import asyncpg

from aiqueue.db.embedded import recreate_database, with_database
from tests.catalog import FIRST_USER_OID, Catalog, catalog, catalog_query

_OURS = ("n.nspname NOT IN ('pg_catalog', 'information_schema')"
         " AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%'")
# Per table: its size on disk with its indexes and TOAST, and the planner's
# estimates of it and of its indexes.  A table whose figures are the template's
# holds what it held there: a row ever written into it, even one rolled back or
# deleted, leaves pages behind.
_FIGURES = f"""SELECT n.nspname, c.relname,
    ROW(pg_total_relation_size(c.oid), c.relpages, c.reltuples, c.relallvisible,
        (SELECT array_agg(ROW(i.relpages, i.reltuples, i.relallvisible) ORDER BY i.relname)
         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
         WHERE x.indrelid = c.oid))::text AS figures
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE {_OURS} AND c.relkind IN ('r', 'p')"""
# Which tables refer to which (a TRUNCATE must take the tables referring to it along).
_REFERRERS = """SELECT rn.nspname AS rs, r.relname AS rt, tn.nspname AS ts, t.relname AS tt
  FROM pg_constraint k
  JOIN pg_class r ON r.oid = k.conrelid JOIN pg_namespace rn ON rn.oid = r.relnamespace
  JOIN pg_class t ON t.oid = k.confrelid JOIN pg_namespace tn ON tn.oid = t.relnamespace
 WHERE k.contype = 'f'"""
# The planner's estimates of every relation of ours, tables, indexes and TOAST.
_ESTIMATES = f"""SELECT oid::int8, relpages, reltuples, relallvisible FROM pg_class
 WHERE oid >= {FIRST_USER_OID} AND relkind IN ('r', 'p', 'i', 't') ORDER BY 1"""
_SEQUENCES = f"""SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {_OURS} AND c.relkind = 'S' ORDER BY 1"""


# Everything a test could see of the database's contents and of the planner's view
# of them, per relation of our own (oid from FIRST_USER_OID on, TOAST included).
_STATE = f"""SELECT c.relname, c.relkind::text AS kind, c.relpages, c.reltuples, c.relallvisible,
    pg_relation_size(c.oid, 'main') AS main, pg_relation_size(c.oid, 'fsm') AS fsm,
    pg_relation_size(c.oid, 'vm') AS vm
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid >= {FIRST_USER_OID} AND n.nspname NOT LIKE 'pg\\_temp\\_%'
   AND c.relkind IN ('r', 'p', 'i', 't', 'S') ORDER BY c.relname"""


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Table:
    schema: str
    name: str

    @property
    def sql(self) -> str:
        return f"{_quote(self.schema)}.{_quote(self.name)}"


async def _figures(conn: asyncpg.Connection) -> dict[Table, str]:
    return {Table(r["nspname"], r["relname"]): r["figures"] for r in await conn.fetch(_FIGURES)}


def _content_query(tables: list[Table]) -> str:
    """Each table's rows, hashed."""
    return " UNION ALL ".join(
        f"SELECT {k}, md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), ''))"
        f" FROM {t.sql} t" for k, t in enumerate(tables)) or "SELECT 0, ''"


@dataclass(frozen=True)
class Snapshot:
    """What a copy of the template holds: each table's figures, the rows the
    migrations wrote (binary COPY, and hashed), each sequence's state, and the hash
    of its catalog."""

    figures: dict[Table, str]
    referrers: dict[Table, set[Table]]
    rows: dict[Table, bytes]
    content: list[str]
    sequences: dict[str, tuple[int, bool]]
    estimates: list[tuple[int, int, float, int]]
    catalog: Catalog

    def closure(self, tables: set[Table]) -> set[Table]:
        """`tables` and every table that refers to one of them, all the way along."""
        todo, seen = list(tables), set(tables)
        while todo:
            for referrer in self.referrers.get(todo.pop(), ()):
                if referrer not in seen:
                    seen.add(referrer)
                    todo.append(referrer)
        return seen


async def snapshot(dsn: str) -> Snapshot:
    """The template's state, read once per session."""
    conn = await asyncpg.connect(dsn)
    try:
        figures = await _figures(conn)
        referrers: dict[Table, set[Table]] = {}
        for r in await conn.fetch(_REFERRERS):
            referrers.setdefault(Table(r["ts"], r["tt"]), set()).add(Table(r["rs"], r["rt"]))
        rows = {}
        for table in sorted(figures, key=lambda t: t.sql):
            if await conn.fetchval(f"SELECT EXISTS (SELECT FROM {table.sql})"):
                buf = io.BytesIO()
                await conn.copy_from_table(table.name, schema_name=table.schema, output=buf,
                                           format="binary")
                rows[table] = buf.getvalue()
        content = [r[1] for r in await conn.fetch(_content_query(list(rows)) + " ORDER BY 1")]
        sequences = {}
        for (name,) in await conn.fetch(_SEQUENCES):
            seq = await conn.fetchrow(f"SELECT last_value, is_called FROM {name}")
            sequences[name] = (seq["last_value"], seq["is_called"])
        estimates = [(r[0], r[1], r[2], r[3]) for r in await conn.fetch(_ESTIMATES)]
        return Snapshot(figures, referrers, rows, content, sequences, estimates,
                        await catalog(conn, await catalog_query(conn)))
    finally:
        await conn.close()


async def reset(conn: asyncpg.Connection, snap: Snapshot) -> set[Table]:
    """Put the tables and sequences back as the template has them, in one
    transaction; returns the tables it emptied.

    A table whose figures (or, for one the migrations filled, rows) differ from the
    template's is emptied by TRUNCATE, with every table referring to it: they get
    new, empty files.  The migrations' rows are copied back with triggers off.  A
    TRUNCATE leaves the planner's estimates of a table and its indexes as VACUUM
    would find them (0 pages, -1 rows), not as CREATE TABLE and CREATE INDEX left
    them in the template (an index of an empty table: 1 page, 0 rows); the
    template's are written back into pg_class, so that plans are a fresh copy's.
    The database's activity counters are reset, as a new database's are.
    """
    figures = await _figures(conn)
    seeded = list(snap.rows)
    content = [r[1] for r in await conn.fetch(_content_query(seeded) + " ORDER BY 1")]
    dirty = {t for t in snap.figures if figures.get(t) != snap.figures[t]}
    dirty |= {t for t, now, then in zip(seeded, content, snap.content, strict=True)
              if now != then}
    dirty = snap.closure(dirty)
    async with conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        if dirty:
            await conn.execute(f"TRUNCATE {', '.join(t.sql for t in dirty)}")
        for table in seeded:
            if table in dirty:
                await conn.copy_to_table(table.name, schema_name=table.schema,
                                         source=io.BytesIO(snap.rows[table]), format="binary")
        await conn.execute(
            "UPDATE pg_catalog.pg_class c SET relpages = v.pages, reltuples = v.tuples,"
            " relallvisible = v.visible FROM unnest($1::int8[], $2::int4[], $3::float4[],"
            " $4::int4[]) AS v(oid, pages, tuples, visible) WHERE c.oid = v.oid AND"
            " (c.relpages, c.reltuples, c.relallvisible) IS DISTINCT FROM"
            " (v.pages, v.tuples, v.visible)", *map(list, zip(*snap.estimates, strict=True)))
        if snap.sequences:
            await conn.execute("SELECT " + ", ".join(
                f"setval('{name}', {value}, {called})"
                for name, (value, called) in snap.sequences.items()))
    # A new database's activity counters start at zero: autovacuum would otherwise
    # count the earlier tests' writes towards analysing this test's tables.
    await conn.execute("SELECT pg_stat_reset()")
    return dirty


async def state(conn: asyncpg.Connection) -> dict[str, object]:
    """Every row of every table, every sequence, every relation's size and estimates,
    and the catalog's hash: what two databases that a test cannot tell apart share."""
    found: dict[str, object] = {}
    for rel in await conn.fetch(_STATE):
        found[f"relation {rel['relname']}"] = tuple(rel)
    for table in await _figures(conn):
        rows = await conn.fetch(f"SELECT t::text AS row FROM {table.sql} t ORDER BY 1")
        found[f"rows {table.sql}"] = [r["row"] for r in rows]
    for (name,) in await conn.fetch(_SEQUENCES):
        found[f"sequence {name}"] = tuple(
            await conn.fetchrow(f"SELECT last_value, log_cnt, is_called FROM {name}"))
    found["catalog"] = (await catalog(conn, await catalog_query(conn))).parts
    return found


def differences(left: dict[str, object], right: dict[str, object]) -> list[str]:
    """The keys of two states whose values differ."""
    return sorted(k for k in left.keys() | right.keys() if left.get(k) != right.get(k))


def _name(dsn: str) -> str:
    return urlsplit(dsn).path.lstrip("/")


@dataclass
class Tally:
    """Databases used again, and the tests after which one's catalog had changed."""

    reused: int = 0
    dirtied: list[str] = field(default_factory=list)


@dataclass
class Pool:
    """The session's databases: `acquire` hands out one in the template's state."""

    admin_dsn: str
    template: str
    snap: Snapshot
    new_name: Callable[[], str]
    free: list[tuple[str, str]] = field(default_factory=list)  # (name, its last test)
    tally: Tally = field(default_factory=Tally)
    # The template's `state`, to check every database put back against (slow: the
    # suite's audit, AIQUEUE_TEST_DB_AUDIT=1, and tests/integration/test_db_reuse.py).
    expected: dict[str, object] | None = None

    async def acquire(self) -> str:
        while self.free:
            name, user = self.free.pop()
            dsn = await self._put_back(name)
            if dsn:
                self.tally.reused += 1
                return dsn
            self.tally.dirtied.append(user)
        return await recreate_database(self.admin_dsn, self.new_name(), template=self.template)

    def release(self, dsn: str, user: str) -> None:
        self.free.append((_name(dsn), user))

    async def close(self) -> None:
        while self.free:
            await recreate_database(self.admin_dsn, self.free.pop()[0], create=False)

    async def _put_back(self, name: str) -> str | None:
        """The database under a new name in the template's state; None (and the
        database dropped) when its catalog is no longer the template's."""
        renamed = self.new_name()
        admin = await asyncpg.connect(self.admin_dsn)
        try:
            await admin.execute("SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
                                " WHERE datname = $1 AND pid <> pg_backend_pid()", name)
            await admin.execute(f"ALTER DATABASE {name} RENAME TO {renamed}")
        except asyncpg.PostgresError:  # a session came back in between
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            return None
        finally:
            await admin.close()
        dsn = with_database(self.admin_dsn, renamed)
        conn = await asyncpg.connect(dsn)
        try:
            await reset(conn, self.snap)
            same = await catalog(conn, self.snap.catalog.query) == self.snap.catalog
            if same and self.expected is not None:
                changed = differences(await state(conn), self.expected)
                assert not changed, f"{renamed} put back differs from the template: {changed}"
        except asyncpg.PostgresError:  # a table or a column is gone
            same = False
        finally:
            await conn.close()
        if not same:
            await recreate_database(self.admin_dsn, renamed, create=False)
            return None
        return dsn
