"""A lean HTTP/1.1 transport for httpx: keep-alive asyncio streams, nothing else.

The dispatch and the self-chain are on the hot path of every job.  httpx's
default stack (httpcore on anyio, h11) costs about a millisecond of CPU per
request on a small machine; this transport speaks just enough HTTP/1.1 —
Content-Length or chunked bodies, keep-alive, TLS — to drop most of that,
while callers keep httpx's API (and respx keeps working on the default stack,
which tests select through Settings).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import defaultdict
from typing import Any

import httpx

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_IDLE_PER_HOST = 32
Key = tuple[str, str, int]


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def close(self) -> None:
        self.writer.close()


class _Stale(Exception):
    """A pooled connection died before any byte of the response arrived."""


def _ssl_context() -> ssl.SSLContext:
    try:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:  # pragma: no cover - httpx depends on certifi
        return ssl.create_default_context()


class LeanTransport(httpx.AsyncBaseTransport):
    """Pooled keep-alive HTTP/1.1 over asyncio streams."""

    def __init__(self) -> None:
        self._idle: dict[Key, list[_Conn]] = defaultdict(list)
        self._ssl: ssl.SSLContext | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        key: Key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        body = request.content if isinstance(request.stream, httpx.ByteStream) else (
            await request.aread())
        head = _head(request, len(body))
        conn = self._idle[key].pop() if self._idle[key] else None
        if conn is not None:
            try:
                return await self._exchange(key, conn, head + body, timeouts, request)
            except _Stale:
                pass  # the server closed an idle connection; open a fresh one
        conn = await self._connect(key, timeouts.get("connect"))
        try:
            return await self._exchange(key, conn, head + body, timeouts, request)
        except _Stale as exc:
            raise httpx.RemoteProtocolError("server closed the connection",
                                            request=request) from exc

    async def _connect(self, key: Key, timeout: float | None) -> _Conn:
        scheme, host, port = key
        if scheme == "https" and self._ssl is None:
            self._ssl = _ssl_context()
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=self._ssl if scheme == "https" else None,
                    limit=MAX_HEADER_BYTES)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connect to {host}:{port} timed out") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}") from exc
        return _Conn(reader, writer)

    async def _exchange(self, key: Key, conn: _Conn, data: bytes,
                        timeouts: dict[str, float | None], request: httpx.Request
                        ) -> httpx.Response:
        try:
            conn.writer.write(data)
            async with asyncio.timeout(timeouts.get("read")):
                try:
                    raw_head = await conn.reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError as exc:
                    conn.close()
                    if not exc.partial:
                        raise _Stale from exc
                    raise httpx.RemoteProtocolError("truncated response",
                                                    request=request) from exc
                status, headers, keep_alive = _parse_head(raw_head, request)
                content = await _read_body(conn.reader, headers, keep_alive, request)
        except TimeoutError as exc:
            conn.close()
            raise httpx.ReadTimeout("timed out waiting for the response",
                                    request=request) from exc
        except (ConnectionError, OSError) as exc:
            conn.close()
            raise _Stale from exc
        except asyncio.LimitOverrunError as exc:
            conn.close()
            raise httpx.RemoteProtocolError("response headers too large",
                                            request=request) from exc
        except httpx.HTTPError:
            conn.close()
            raise
        if keep_alive and len(self._idle[key]) < MAX_IDLE_PER_HOST:
            self._idle[key].append(conn)
        else:
            conn.close()
        return httpx.Response(status, headers=headers, content=content, request=request)

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


def _head(request: httpx.Request, length: int) -> bytes:
    url = request.url
    target = url.raw_path.decode("ascii")
    lines = [f"{request.method} {target} HTTP/1.1"]
    seen = set()
    for name, value in request.headers.multi_items():
        lowered = name.lower()
        if lowered in ("content-length", "transfer-encoding", "connection"):
            continue
        seen.add(lowered)
        lines.append(f"{name}: {value}")
    if "host" not in seen:
        lines.append(f"Host: {url.netloc.decode('ascii')}")
    lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _parse_head(raw: bytes, request: httpx.Request) -> tuple[int, list[tuple[str, str]], bool]:
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise httpx.RemoteProtocolError("malformed status line", request=request)
    headers = []
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
    connection = ",".join(v for n, v in headers if n.lower() == "connection").lower()
    keep_alive = parts[0] == "HTTP/1.1" and "close" not in connection
    return int(parts[1]), headers, keep_alive


async def _read_body(reader: asyncio.StreamReader, headers: list[tuple[str, str]],
                     keep_alive: bool, request: httpx.Request) -> bytes:
    fields = {n.lower(): v for n, v in headers}
    if "chunked" in fields.get("transfer-encoding", "").lower():
        return await _read_chunked(reader, request)
    length = fields.get("content-length")
    if length is not None:
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            raise httpx.RemoteProtocolError("bad Content-Length", request=request)
        return await reader.readexactly(int(length))
    if keep_alive:
        return b""  # e.g. 204/304, or a body-less keep-alive answer
    return await reader.read(MAX_BODY_BYTES)


async def _read_chunked(reader: asyncio.StreamReader, request: httpx.Request) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise httpx.RemoteProtocolError("bad chunk size", request=request) from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers
            return b"".join(chunks)
        total += size
        if total > MAX_BODY_BYTES:
            raise httpx.RemoteProtocolError("response body too large", request=request)
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


def lean_client(**kwargs: Any) -> httpx.AsyncClient:
    """An httpx client on the lean transport."""
    return httpx.AsyncClient(transport=LeanTransport(), **kwargs)


class Poster:
    """POST straight to an httpx transport, without the client layer.

    The dispatch and the chain need no cookies, redirects, auth flows or event
    hooks; skipping httpx.AsyncClient saves about 0.15 ms of CPU per job here.
    Errors are httpx's own (TimeoutException, HTTPError), as from a client.
    """

    def __init__(self, transport: httpx.AsyncBaseTransport) -> None:
        self.transport = transport

    async def post(self, url: str, *, timeout: httpx.Timeout, content: bytes = b"",
                   headers: dict[str, str] | None = None) -> httpx.Response:
        request = httpx.Request("POST", url, headers=headers, content=content,
                                extensions={"timeout": timeout.as_dict()})
        response = await self.transport.handle_async_request(request)
        try:
            await response.aread()
        finally:
            await response.aclose()
        return response

    async def aclose(self) -> None:
        await self.transport.aclose()
