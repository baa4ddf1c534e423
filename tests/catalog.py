"""A hash of what a database's catalog says about its own objects.

Two copies of one template have the same oids, so their catalogs hash alike until
one of them is changed: DDL, GRANT or REVOKE, COMMENT, ALTER DATABASE ... SET, an
ANALYZE (its statistics) or a prepared transaction left open.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

# Objects with an oid below this come with PostgreSQL itself (FirstNormalObjectId).
FIRST_USER_OID = 16384
# Columns that change without any change of meaning: a table's storage (TRUNCATE
# gives it a new file), the planner's size estimates, freeze horizons and the name.
VOLATILE = {"pg_class": {"relfilenode", "relpages", "reltuples", "relallvisible",
                         "relfrozenxid", "relminmxid"},
            "pg_database": {"oid", "datname", "datfrozenxid", "datminmxid"}}
OID_TYPES = {"oid", "regproc", "regprocedure", "regclass", "regtype", "regnamespace",
             "regrole"}


@dataclass(frozen=True)
class Catalog:
    """The query and what it gave: (catalog table, md5 of its rows about our objects)."""

    query: str
    parts: tuple[tuple[str, str], ...]


async def catalog(conn: asyncpg.Connection, query: str) -> Catalog:
    return Catalog(query, tuple((r[0], r[1]) for r in await conn.fetch(query)))


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def catalog_query(conn: asyncpg.Connection) -> str:
    """One query hashing every catalog row about this database's own objects.

    A row is about our objects when one of its oid columns names a user object, or
    (for a built-in object) when it carries privileges, which only a GRANT or REVOKE
    gives it.  Temporary schemas are left out: a session that used one leaves it
    behind, empty and seen by no other session.
    """
    rows = await conn.fetch(
        "SELECT c.relname, a.attname, t.typname FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'pg_catalog'"
        " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
        " JOIN pg_type t ON t.oid = a.atttypid"
        " WHERE c.relkind = 'r' AND NOT c.relisshared ORDER BY c.relname, a.attnum")
    tables: dict[str, list[tuple[str, str]]] = {}
    for r in rows:
        tables.setdefault(r["relname"], []).append((r["attname"], r["typname"]))
    parts = [_table_part(name, cols) for name, cols in tables.items()]
    database = await conn.fetch(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'pg_database'::regclass"
        " AND attnum > 0 AND NOT attisdropped ORDER BY attnum")
    parts.append(_database_part([r["attname"] for r in database]))
    return " UNION ALL ".join(parts) + " ORDER BY 1"


def _table_part(table: str, cols: list[tuple[str, str]]) -> str:
    kept = [(c, t) for c, t in cols if c not in VOLATILE.get(table, set())]
    ours = [f"t.{_quote(c)} >= {FIRST_USER_OID}" for c, t in kept if t in OID_TYPES]
    ours += [f"t.{_quote(c)} IS NOT NULL" for c, t in kept if t == "_aclitem"]
    where = " OR ".join(ours) or "true"
    if table == "pg_namespace":
        where = f"({where}) AND t.nspname NOT LIKE 'pg\\_%temp\\_%'"
    row = "ROW(" + ", ".join(f"t.{_quote(c)}" for c, _ in kept) + ")::text"
    return (f"SELECT '{table}', md5(coalesce(string_agg({row}, E'\\n' ORDER BY {row}), ''))"
            f" FROM pg_catalog.{table} t WHERE {where}")


def _database_part(columns: list[str]) -> str:
    """The database's own row, its settings (ALTER DATABASE ... SET), the shared
    catalog's dependencies on its objects (grants to roles, owners) and its open
    prepared transactions: none of them lives in the database itself."""
    kept = ", ".join("d." + _quote(c) for c in columns if c not in VOLATILE["pg_database"])
    here = "(SELECT oid FROM pg_database WHERE datname = current_database())"
    return (
        "SELECT 'pg_database', md5(concat_ws(E'\\n',"
        f" (SELECT ROW({kept})::text FROM pg_database d WHERE d.datname = current_database()),"
        " (SELECT string_agg(ROW(s.setrole, s.setconfig)::text, ',' ORDER BY s.setrole)"
        f"   FROM pg_db_role_setting s WHERE s.setdatabase = {here}),"
        " (SELECT string_agg(ROW(s.classid, s.objid, s.objsubid, s.refclassid, s.refobjid,"
        "   s.deptype)::text, ',' ORDER BY s.classid, s.objid, s.objsubid, s.refobjid)"
        f"   FROM pg_shdepend s WHERE s.dbid = {here}),"
        " (SELECT count(*)::text FROM pg_prepared_xacts WHERE database = current_database())))")
