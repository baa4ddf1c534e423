"""Prepared statements where the connection keeps them (DATABASE_PREPARED_STATEMENTS).

With them, each named statement is parsed and planned once per connection and
then only bound and run; without them it is prepared again on every call.  A
transaction-mode pooler (Supavisor's port 6543, PgBouncer before 1.21 or
without `max_prepared_statements`) may hand each transaction another server
backend, which does not know the statement: there they must stay off.

`auto` (the default) is on for a direct connection and off behind such a
pooler: off for a managed pooler's endpoint (Supabase's port 6543, Neon's
`-pooler` host), and off when the server listens on another port than the URL
names (something sits between, e.g. PgBouncer on 6432).  `on` and `off` are
taken as said: `on` for a PgBouncer 1.21+ with `max_prepared_statements`.
A pooler on the database's own port passes that check; so in `auto` the first
"prepared statement … does not exist / already exists" turns them off for the
pool (db/pool.py, `stop_preparing`), and the request runs again without them.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import asyncpg

from aiqueue.settings.env import PreparedStatements as Mode

# Statements kept per connection: every named block of the store fits.
CACHE_SIZE = 256
# Ports and host parts of the managed transaction poolers: Supabase's listens on
# 6543, Neon's pooled endpoints carry "-pooler" in the host.
POOLER_PORTS = {6543}
POOLER_HOST_PART = "-pooler"


@dataclass(frozen=True)
class Choice:
    """Whether the pool's connections keep prepared statements, and why (the doctor says)."""

    on: bool
    why: str

    @property
    def cache_size(self) -> int:
        return CACHE_SIZE if self.on else 0


# `auto` after a connection reported a statement missing or already there: a pooler the
# port check did not see hands backends around, so the pool goes on without them.
LOST = Choice(False, "auto: turned off after a connection reported a prepared statement "
                     "missing or already present (a transaction pooler the port check did "
                     "not see)")


def url_port(dsn: str) -> int:
    """The port a URL names (its `port` parameter for a socket path), else 5432."""
    parts = urlsplit(dsn)
    try:
        port = parts.port
    except ValueError:
        port = None
    query = parse_qs(parts.query).get("port")
    return port or (int(query[0]) if query and query[0].isdigit() else 5432)


def known_pooler_url(dsn: str) -> bool:
    """A managed pooler's well-known endpoint (Supabase port 6543, Neon's -pooler host)."""
    return url_port(dsn) in POOLER_PORTS or POOLER_HOST_PART in (urlsplit(dsn).hostname or "")


def by_url(mode: Mode, dsn: str) -> Choice | None:
    """The choice the setting and the URL make alone; None: ask the server (ask_server)."""
    if mode == "on":
        return Choice(True, "DATABASE_PREPARED_STATEMENTS=on")
    if mode == "off":
        return Choice(False, "DATABASE_PREPARED_STATEMENTS=off")
    if known_pooler_url(dsn):
        return Choice(False, "auto: the URL is a managed transaction pooler's endpoint")
    return None


async def ask_server(conn: asyncpg.Connection, dsn: str) -> Choice:
    """`auto` on a URL that names no known pooler: on when the server listens on the URL's
    port (nothing between), else off (a pooler or proxy in front)."""
    server = int(await conn.fetchval("SELECT current_setting('port')"))
    if server == url_port(dsn):
        return Choice(True, f"auto: a direct connection (the server listens on the URL's "
                            f"port {server})")
    return Choice(False, f"auto: the server listens on port {server}, the URL names "
                         f"{url_port(dsn)}: a pooler may sit between")
