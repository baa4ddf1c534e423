"""Helpers for the live-events and teacher-page e2e tests: threaded servers, an SSE reader."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import uvicorn

from tests.e2e.servers import free_port


@dataclass
class Served:
    """An app served on loopback by uvicorn in a thread (with its lifespan)."""

    app: Any
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def serve(app: Any, port: int | None = None) -> Iterator[Served]:
    """Serve `app` in a background thread until the block ends."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            access_log=False, lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            raise RuntimeError("test server did not start")
        time.sleep(0.02)
    try:
        yield Served(app, port)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        assert not thread.is_alive(), "the server did not stop"


@dataclass
class Stream:
    """What one SSE connection delivered."""

    status_code: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    retry: int | None = None
    ended_by_server: bool = False

    @property
    def ids(self) -> list[str]:
        return [e["id"] for e in self.events]


async def read_sse(
    url: str,
    *,
    headers: dict[str, str] | None = None,
    until: Callable[[Stream], bool] = lambda s: False,
    timeout: float = 20.0,
    opened: asyncio.Event | None = None,
) -> Stream:
    """Read one SSE response until `until` holds, the server ends it, or `timeout` passes."""
    import json

    out = Stream()
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout, read=timeout)) as client:
        async with asyncio.timeout(timeout):
            async with client.stream("GET", url, headers=headers) as response:
                out.status_code = response.status_code
                if response.status_code != 200:
                    await response.aread()
                    return out
                fields: dict[str, str] = {}
                async for line in response.aiter_lines():
                    if line.startswith("retry:"):
                        out.retry = int(line.partition(":")[2])
                        if opened is not None:
                            opened.set()
                    elif line.startswith(":"):
                        out.comments.append(line[1:].strip())
                    elif line:
                        name, _, value = line.partition(":")
                        fields[name] = value.removeprefix(" ")
                    elif "data" in fields:
                        out.events.append({"id": fields.get("id"), "event": fields.get("event"),
                                           "data": json.loads(fields["data"])})
                        fields = {}
                        if until(out):
                            return out
                out.ended_by_server = True
    return out


async def feed(conn: asyncpg.Connection, assignment_id: str) -> list[tuple[str, str, str]]:
    """(cursor, queue_id, status) of every event of the assignment, in feed order."""
    rows = await conn.fetch(
        "SELECT tx::text AS tx, id, k, queue_id, status FROM ai_marking_event_feed "
        "WHERE assignment_id = $1 ORDER BY tx, id, k", assignment_id)
    return [(f"{r['tx']}-{r['id']}" + (f"-{r['k']}" if r["k"] else ""), str(r["queue_id"]),
             r["status"]) for r in rows]
