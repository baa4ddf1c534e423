"""The dispatch's HTTP client against raw socket servers on loopback: the edge cases.

Each case is one the hand-written client got wrong: interim 1xx answers, a
redirect, a truncated body, and a pooled connection that dies after the
request was written (which must not be sent a second time).
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from aiqueue import dispatch
from aiqueue.runtime import http_client
from aiqueue.settings import Settings
from aiqueue.tokens import Tokens
from tests.unit.fakes import make_job

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
Start = Callable[[Handler], Awaitable[str]]
SECRET = "client-secret-0123456789abcdef"
ACCEPTED = b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok"


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One whole request (head and Content-Length body); its head is returned."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    return head


@pytest.fixture
async def server() -> AsyncIterator[Start]:
    servers: list[asyncio.Server] = []
    writers: list[asyncio.StreamWriter] = []

    async def start(handler: Handler) -> str:
        async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            try:
                await handler(reader, writer)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass  # the client went away: the case under test may do that
            finally:
                writer.close()

        srv = await asyncio.start_server(tracked, "127.0.0.1", 0)
        servers.append(srv)
        return f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"

    yield start
    for writer in writers:
        writer.close()
    for srv in servers:
        srv.close()
        await srv.wait_closed()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with http_client() as http:
        yield http


async def send(client: httpx.AsyncClient, url: str, **kw: Any) -> dispatch.Outcome:
    settings = Settings(queue_secrets=(SECRET,), function_url=url, dispatch_timeout_seconds=30,
                        **kw)
    return await dispatch.send(client, make_job(), settings.target(), Tokens(SECRET))


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (RST), not an orderly FIN."""
    sock: socket.socket = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def test_interim_1xx_answers_are_skipped_for_the_final_one(
    server: Start, client: httpx.AsyncClient
):
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n"
                         b"HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n"
                         b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 23\r\n\r\n{\"status\": \"completed\"}")
            await writer.drain()

    url = await server(handler)
    # Sync mode reads the body: it must be the final answer's, not an interim one.
    for _ in range(3):
        assert await send(client, url, function_mode="sync") == dispatch.Accepted(
            {"status": "completed"})
    assert connections == 1  # the connection stayed usable: nothing was left unread


async def test_a_redirect_is_a_failed_attempt_and_not_followed(
    server: Start, client: httpx.AsyncClient
):
    elsewhere = 0

    async def target(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal elsewhere
        await read_request(reader)
        elsewhere += 1
        writer.write(ACCEPTED)
        await writer.drain()

    other = await server(target)

    async def redirecting(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {other}/mark\r\n"
                     "Content-Length: 0\r\n\r\n".encode())
        await writer.drain()

    url = await server(redirecting)
    assert await send(client, url) == dispatch.Failed("function_http_307", 307)
    assert elsewhere == 0


async def test_a_truncated_body_fails_the_attempt_at_once(
    server: Start, client: httpx.AsyncClient
):
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 100\r\n\r\n{\"acc")
        await writer.drain()
        writer.close()

    url = await server(handler)
    # A transport error, not the 30 s dispatch timeout and not an exception.
    assert await send(client, url) == dispatch.Failed("dispatch_transport_error")


@pytest.mark.parametrize("how", ["reset", "close"])
async def test_no_second_post_after_a_pooled_connection_dies_mid_request(
    server: Start, client: httpx.AsyncClient, how: str
):
    posts = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal posts
        await read_request(reader)
        posts += 1
        writer.write(ACCEPTED)  # keep-alive: the client pools this connection
        await writer.drain()
        await read_request(reader)  # the second job arrives whole on the pooled connection
        posts += 1
        if how == "reset":
            reset(writer)
        else:
            writer.close()

    url = await server(handler)
    assert await send(client, url) == dispatch.Accepted()
    assert await send(client, url) == dispatch.Failed("dispatch_transport_error")
    await asyncio.sleep(0.2)  # a resend, if any, would have arrived by now
    assert posts == 2


async def test_a_stale_idle_connection_is_replaced_before_sending(
    server: Start, client: httpx.AsyncClient
):
    posts = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal posts
        await read_request(reader)
        posts += 1
        writer.write(ACCEPTED)
        await writer.drain()
        writer.close()  # closes the idle connection without saying so

    url = await server(handler)
    assert await send(client, url) == dispatch.Accepted()
    await asyncio.sleep(0.1)
    assert await send(client, url) == dispatch.Accepted()
    assert posts == 2


async def test_garbage_and_refused_connections_are_failed_attempts(
    server: Start, client: httpx.AsyncClient
):
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SMTP ready\r\n\r\n")
        await writer.drain()

    url = await server(handler)
    assert await send(client, url) == dispatch.Failed("dispatch_transport_error")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    assert await send(client, closed) == dispatch.Failed("dispatch_connect_error")
