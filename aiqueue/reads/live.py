"""Live events: one LISTEN connection per instance shared by every SSE client, else polling."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any

from aiqueue import logs
from aiqueue.db.listener import ChangeListener
from aiqueue.db.store import Store
from aiqueue.errors import Invalid, StoreError
from aiqueue.models import EventCursor, MarkingEvent
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings

# aiqueue_notify() (db/sql/functions/80_feed.sql) wakes it on every event while an instance
# listens.
CHANNEL = "ai_marking"
TOKEN_MAX_AGE = 600  # a page's events token; the page asks for a fresh one when it lapses
RETRY_MS = 1500  # how soon EventSource reconnects after a stream ends


@dataclass(frozen=True)
class LiveConfig:
    """How long a stream lives and how often it speaks and looks."""

    max_seconds: float = 250.0
    heartbeat_seconds: float = 10.0
    poll_seconds: float = 1.0
    reconnect_seconds: float = 5.0
    batch: int = 500

    @classmethod
    def from_settings(cls, settings: Settings) -> LiveConfig:
        """The streams' timing from the settings (QUEUE_EVENTS_*), read at start-up."""
        return cls(
            max_seconds=settings.events_max_seconds,
            heartbeat_seconds=settings.events_heartbeat_seconds,
            poll_seconds=settings.events_poll_seconds,
        )


class EventHub:
    """Wakes every live-events stream of this instance when the queue changes.

    One LISTEN connection to the direct URL serves all streams and is open only
    while some stream is; without a direct URL, or while LISTEN is failing,
    streams poll every `poll_seconds` instead.
    """

    def __init__(self, dsn: str | None, config: LiveConfig) -> None:
        self.dsn = dsn
        self.config = config
        self._listener: ChangeListener | None = None
        self._changed = asyncio.Event()
        self._closed = False
        self._lock = asyncio.Lock()
        self._subscribers = 0
        self._retry_at = 0.0
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def listening(self) -> bool:
        return self._listener is not None and self._listener.alive

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def subscribers(self) -> int:
        return self._subscribers

    def changed(self) -> asyncio.Event:
        """The event set at the next change; take it *before* reading, then wait on it."""
        return self._changed

    def wake(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def join(self) -> None:
        self._subscribers += 1
        await self.ensure_listening()

    def leave(self) -> None:
        """Synchronous: it runs in a stream's `finally`, also when the stream is cancelled."""
        self._subscribers -= 1
        if self._subscribers <= 0:
            self._drop_listener()

    async def ensure_listening(self) -> None:
        """Open the LISTEN connection if it is wanted, missing and not failing lately."""
        if self.dsn is None or self._closed or self.listening or self._subscribers <= 0:
            return
        if time.monotonic() < self._retry_at:
            return
        async with self._lock:
            if self.listening or time.monotonic() < self._retry_at:
                return
            try:
                listener = await ChangeListener.open(self.dsn, CHANNEL, self.wake, self._lost)
            except StoreError as exc:
                self._retry_at = time.monotonic() + self.config.reconnect_seconds
                logs.event("listen", outcome="failed", code=exc.code)
                return
            self._listener = listener
            if self._subscribers <= 0 or self._closed:
                self._drop_listener()
            # Streams may have missed changes while nobody listened: let them look.
            self.wake()

    def _lost(self) -> None:
        # Also called when we close a listener ourselves; only a dead current one matters.
        if self._listener is not None and not self._listener.alive:
            self._listener = None
            self._retry_at = time.monotonic() + self.config.reconnect_seconds
            logs.event("listen", outcome="lost")
            self.wake()

    def _drop_listener(self) -> None:
        if self._listener is not None:
            listener, self._listener = self._listener, None
            self._spawn(listener.close())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """End every stream now (shutdown) and close the LISTEN connection."""
        self._closed = True
        self.wake()
        self._drop_listener()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


async def start_cursor(store: Store, last_event_id: str | None) -> EventCursor:
    """Resume after `last_event_id`, or start at the feed's current head."""
    if last_event_id:
        cursor = EventCursor.parse(last_event_id)
        if cursor is None:
            raise Invalid("Last-Event-ID is not an event id this server sent")
        return cursor
    return await store.live_events_head()


async def open_stream(
    rt: Runtime, hub: EventHub, assignment_id: str, last_event_id: str | None
) -> AsyncIterator[str]:
    """A stream of an assignment's events, from `last_event_id` or from now."""
    cursor = await start_cursor(rt.store, last_event_id)
    return stream(rt.store, hub, assignment_id, cursor)


def format_event(event: MarkingEvent) -> str:
    data = json.dumps(event.to_json(), separators=(",", ":"))
    return f"id: {event.cursor}\nevent: marking\ndata: {data}\n\n"


async def stream(
    store: Store, hub: EventHub, assignment_id: str, cursor: EventCursor
) -> AsyncIterator[str]:
    """The SSE body: events after `cursor`, heartbeats, and an end before the time limit."""
    cfg = hub.config
    started = time.monotonic()
    await hub.join()
    try:
        # The start's cursor as an id without data: a client whose stream ends before
        # any event still resumes from here (EventSource sends it as Last-Event-ID),
        # not from a later "now" that would skip what happened while it reconnected.
        yield f"retry: {RETRY_MS}\nid: {cursor}\n\n"
        last_sent = time.monotonic()
        while not hub.closed:
            changed = hub.changed()
            try:
                batch = await store.live_events_after(assignment_id, cursor, cfg.batch)
            except StoreError:
                return  # the client reconnects with Last-Event-ID and loses nothing
            for event in batch.events:
                yield format_event(event)
                cursor = event.cursor
            now = time.monotonic()
            if batch.events:
                last_sent = now
                if batch.full and not batch.held_back:
                    continue
            left = started + cfg.max_seconds - now
            if left <= 0:
                return
            # Without LISTEN, or when newer events wait on an older open transaction
            # (which may never notify), look again soon; otherwise a notify wakes us.
            quick = batch.held_back or not hub.listening
            wait = min(cfg.poll_seconds if quick else cfg.heartbeat_seconds, left,
                       last_sent + cfg.heartbeat_seconds - now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), max(wait, 0.0))
            if time.monotonic() - last_sent >= cfg.heartbeat_seconds:
                yield ": keep-alive\n\n"
                last_sent = time.monotonic()
            await hub.ensure_listening()
    finally:
        hub.leave()
