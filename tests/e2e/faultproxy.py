"""A fault-injecting TCP proxy in front of PostgreSQL: cut, stall and silent drop on demand.

Runs its own event loop in a thread, so a synchronous test (or another loop)
drives it.  `cut` resets every connection; `stall` stops forwarding for a
while, then delivers what waited; `silent_drop` stops forwarding forever on
the connections open now while both their sockets stay open (a NAT that
forgot them) — new connections work.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit


@dataclass(eq=False)
class Link:
    """One client connection and its server connection."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    dropped: bool = False
    pipes: list[asyncio.Task[None]] = field(default_factory=list)


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        # Linger 0: close() sends a RST, as a crashed peer or a killed NAT entry does.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    """Forwards 127.0.0.1:<port> to a PostgreSQL server (TCP or unix socket)."""

    def __init__(self, dsn: str) -> None:
        parts = urlsplit(dsn)
        host = parse_qs(parts.query).get("host", [parts.hostname or "127.0.0.1"])[0]
        self.target_port = parts.port or 5432
        self.unix = f"{host}/.s.PGSQL.{self.target_port}" if host.startswith("/") else None
        self.target_host = host
        self.dsn_parts = parts
        self.links: set[Link] = set()
        self.connections = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._flowing: asyncio.Event = self._call(self._make_event())
        self.server: asyncio.Server = self._call(
            asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = int(self.server.sockets[0].getsockname()[1])

    def dsn(self, database: str) -> str:
        """A DSN reaching `database` through this proxy."""
        user = self.dsn_parts.username or "postgres"
        return urlunsplit(("postgresql", f"{user}@127.0.0.1:{self.port}", f"/{database}", "", ""))

    def _call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=10)

    @staticmethod
    async def _make_event() -> asyncio.Event:
        event = asyncio.Event()
        event.set()
        return event

    async def _open_target(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.unix:
            return await asyncio.open_unix_connection(self.unix)
        return await asyncio.open_connection(self.target_host, self.target_port)

    async def _handle(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            sreader, swriter = await self._open_target()
        except OSError:
            cwriter.transport.abort()
            return
        link = Link(cwriter, swriter)
        self.links.add(link)
        link.pipes = [asyncio.create_task(self._pipe(creader, swriter, link)),
                      asyncio.create_task(self._pipe(sreader, cwriter, link))]
        await asyncio.gather(*link.pipes, return_exceptions=True)
        self.links.discard(link)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    link: Link) -> None:
        try:
            while data := await reader.read(65536):
                await self._flowing.wait()
                if link.dropped:
                    continue  # swallowed: the peer never hears of it
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        if link.dropped:
            # A forgotten connection: the other side is told nothing, ever.
            await asyncio.Event().wait()
        writer.transport.abort()

    # -- faults (call from any thread) -------------------------------------

    def cut(self) -> int:
        """Reset every open connection; how many there were."""
        async def go() -> int:
            links = list(self.links)
            for link in links:
                _reset(link.client)
                _reset(link.server)
            return len(links)
        n: int = self._call(go())
        return n

    def stall(self, seconds: float) -> None:
        """Stop forwarding on every connection (and new ones) for `seconds`, then resume."""
        async def go() -> None:
            self._flowing.clear()
            self.loop.call_later(seconds, self._flowing.set)
        self._call(go())

    def silent_drop(self) -> int:
        """Forward nothing more on the connections open now, keeping them open; how many."""
        async def go() -> int:
            live = [link for link in self.links if not link.dropped]
            for link in live:
                link.dropped = True
            return len(live)
        n: int = self._call(go())
        return n

    def close(self) -> None:
        async def go() -> None:
            self.server.close()
            for link in list(self.links):
                for task in link.pipes:
                    task.cancel()
                link.client.transport.abort()
                link.server.transport.abort()
        self._call(go())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
