"""The lean HTTP transport against real servers on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from aiqueue.transport import LeanTransport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head, await reader.readexactly(length)


@pytest.fixture
async def server() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    servers: list[asyncio.Server] = []
    writers: list[asyncio.StreamWriter] = []

    async def start(handler: Handler) -> str:
        async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            await handler(reader, writer)

        srv = await asyncio.start_server(tracked, "127.0.0.1", 0)
        servers.append(srv)
        port = srv.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    yield start
    # Since Python 3.12 wait_closed() also waits for every open connection.
    for writer in writers:
        writer.close()
    for srv in servers:
        srv.close()
        await srv.wait_closed()


async def test_keep_alive_reuses_one_connection(server: Callable[[Handler], Awaitable[str]]):
    connections, bodies = 0, []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            while True:
                head, body = await read_request(reader)
                assert head.startswith(b"POST /mark?x=1 HTTP/1.1")
                assert b"authorization: bearer t" in head.lower()
                bodies.append(body)
                writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n"
                             b"Retry-After: 3\r\n\r\nok")
        except asyncio.IncompleteReadError:
            writer.close()

    url = await server(handler)
    async with httpx.AsyncClient(transport=LeanTransport()) as client:
        for n in range(5):
            r = await client.post(f"{url}/mark?x=1", content=f"body{n}".encode(),
                                  headers={"authorization": "Bearer t"})
            assert r.status_code == 202 and r.text == "ok"
            assert r.headers["retry-after"] == "3"
    assert connections == 1
    assert bodies == [b"body0", b"body1", b"body2", b"body3", b"body4"]


async def test_chunked_body_and_connection_close(server: Callable[[Handler], Awaitable[str]]):
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                     b"5\r\n{\"a\":\r\n3\r\n 1}\r\n0\r\n\r\n")
        await writer.drain()
        writer.close()

    url = await server(handler)
    async with httpx.AsyncClient(transport=LeanTransport()) as client:
        r = await client.post(url, json={})
        assert r.json() == {"a": 1}
        r = await client.post(url, json={})  # a fresh connection after close
        assert r.json() == {"a": 1}


async def test_stale_pooled_connection_is_replaced(server: Callable[[Handler], Awaitable[str]]):
    served = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        await read_request(reader)
        served += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()  # closes without saying so: the pooled connection goes stale

    url = await server(handler)
    async with httpx.AsyncClient(transport=LeanTransport()) as client:
        assert (await client.post(url, content=b"1")).status_code == 200
        await asyncio.sleep(0.05)
        assert (await client.post(url, content=b"2")).status_code == 200
    assert served == 2


async def test_read_timeout_and_refused_connection(server: Callable[[Handler], Awaitable[str]]):
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(5)

    url = await server(handler)
    async with httpx.AsyncClient(transport=LeanTransport()) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(url, content=b"x", timeout=httpx.Timeout(2.0, read=0.1))
        with pytest.raises(httpx.ConnectError):
            await client.post("http://127.0.0.1:9/", content=b"x", timeout=1)


async def test_garbage_answer_is_a_protocol_error(server: Callable[[Handler], Awaitable[str]]):
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SMTP ready\r\n\r\n")
        await writer.drain()
        writer.close()

    url = await server(handler)
    async with httpx.AsyncClient(transport=LeanTransport()) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(url, content=b"x")
