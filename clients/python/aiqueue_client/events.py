"""Live events that survive a dropped connection: reconnect, resume from Last-Event-ID."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from aiqueue_client.errors import MarkingError, error_from
from aiqueue_client.types import MarkingEvent

PATH = "/api/marking/events"
# What the server says in `retry:`, before it has said it (EventSource's habit).
DEFAULT_RETRY_MS = 1500
MAX_BACKOFF_SECONDS = 30.0
# The server speaks at least every 15 s (a heartbeat): silence for longer is a dead link.
READ_TIMEOUT_SECONDS = 45.0


def parse_event(event_id: str, data: str) -> MarkingEvent:
    body: dict[str, Any] = json.loads(data)
    return MarkingEvent(
        id=event_id, queue_id=body["queue_id"], submission_id=body["submission_id"],
        status=body["status"], result=body.get("result"), review=body.get("review"),
        progress=body.get("progress"), waiting_for=body.get("waiting_for"),
        resumes_at=body.get("resumes_at"), paused_by=body.get("paused_by"))


async def follow(
    http: httpx.AsyncClient, assignment_id: str, *, last_event_id: str | None = None,
    read_timeout: float = READ_TIMEOUT_SECONDS, on_open: Callable[[], None] | None = None,
) -> AsyncGenerator[MarkingEvent, None]:
    """Every event of the assignment after `last_event_id` (or from now), until the caller stops.

    The server ends each stream before its platform's time limit and a network may
    drop it at any moment: either way this reconnects, sending the id of the last
    event it yielded, so nothing is lost or repeated.  A 401 or 422 is raised (no
    retry helps); a 5xx or a network error is retried with backoff.
    """
    last, retry_ms, failures = last_event_id, DEFAULT_RETRY_MS, 0
    timeout = httpx.Timeout(10.0, read=read_timeout)
    while True:
        headers = {"Last-Event-ID": last} if last else {}
        try:
            async with aconnect_sse(http, "GET", PATH, params={"assignment_id": assignment_id},
                                    headers=headers, timeout=timeout) as source:
                response = source.response
                if response.status_code != 200:
                    await response.aread()
                    error = error_from(response)
                    if response.status_code < 500:
                        raise error
                    raise _Retry(error.retry_after)
                if on_open is not None:
                    on_open()  # the server fixed the stream's start before answering
                async for sse in source.aiter_sse():
                    if sse.retry is not None:
                        retry_ms = sse.retry
                    # The opening carries the stream's start as an id without data: resume
                    # from there even when no event came before the stream ended.
                    last = sse.id or last
                    if sse.event == "marking" and sse.data:
                        failures = 0
                        yield parse_event(sse.id, sse.data)
            delay = retry_ms / 1000  # the server ended the stream: come back as it asked
        except (httpx.TransportError, SSEError, _Retry) as exc:
            failures += 1
            asked = exc.retry_after if isinstance(exc, _Retry) else None
            delay = asked if asked is not None else \
                min(retry_ms / 1000 * 2 ** (failures - 1), MAX_BACKOFF_SECONDS)
        await asyncio.sleep(delay)


class _Retry(Exception):
    """A 5xx answer: try again (after Retry-After when the server gave one)."""

    def __init__(self, retry_after: float | None) -> None:
        super().__init__("server error")
        self.retry_after = retry_after


__all__ = ["MarkingError", "follow", "parse_event"]
