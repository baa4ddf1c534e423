"""Spans leave from the event loop (docs/tracing.md#what-it-costs): no thread of their own.

The SDK's batching processor exports from a thread of its own, and that thread
takes the GIL for each batch while the event loop waits on its sockets: at
in-flight 8 the loop lost a fifth of its throughput with spans exported as it
went, and none with the same spans sent only at its end (bench --only traces).
Here a finished span is written as protobuf at once (tracing/otlp.py) and its
bytes join a list: no span object outlives its job's step, so none is left for
the garbage collector to walk again and again while it waits (with span objects
waiting, the app's collections took twice the time: `perf`, 2,000 jobs at
in-flight 8).  A batch leaves as an asyncio task of the loop that made it, when
`batch` spans wait or `delay` seconds after the first, sent by an httpx client
of its own.
`flush` sends what waits and awaits what is on its way (on Vercel, before the
invocation ends).  A span made where no loop runs waits for the next batch.

A batch the collector does not take is tried again while it answers 429, 502,
503 or 504 (or not at all), for at most `timeout` seconds, then dropped and
logged (`trace_lost`): tracing never holds up the work it traces.  More than
`queued` spans waiting: new ones are dropped, counted in the same log line.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable, Sequence

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from aiqueue import logs
from aiqueue.settings.tracing import Tracing
from aiqueue.tracing.otlp import encode, request, span_bytes

# Answers a collector gives when it may take the same batch a moment later.
_AGAIN = frozenset((429, 502, 503, 504))
# One request's own limit, within the batch's `timeout` (the SDK exporter's 10 s).
REQUEST_SECONDS = 10.0

# A span waiting for its batch: its protobuf, or (a shape tracing/otlp.py does not
# write, or an exporter that takes spans) the span itself.
Waiting = bytes | ReadableSpan
Send = Callable[[Sequence[Waiting]], Awaitable[bool]]


def protobuf(spans: Sequence[ReadableSpan]) -> bytes:
    """The batch's ExportTraceServiceRequest: tracing/otlp.py's bytes, else the SDK's."""
    data = encode(spans)
    return encode_spans(spans).SerializeToString() if data is None else data


class OtlpHttp:
    """Sends a batch to the collector over OTLP/HTTP in protobuf."""

    def __init__(self, config: Tracing,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.endpoint, self.timeout, self.gzip = config.endpoint, config.timeout, config.gzip
        self.transport = transport
        self.headers = {**dict(config.headers), "Content-Type": "application/x-protobuf"}
        if self.gzip:
            self.headers["Content-Encoding"] = "gzip"
        self.client: httpx.AsyncClient | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        # The one resource and scope of the spans written early (the tracer's).
        self.resource: Resource | None = None
        self.scope: InstrumentationScope | None = None

    def keep(self, span: ReadableSpan) -> Waiting:
        """A finished span as it waits: written now when it is the tracer's kind."""
        if self.resource is None and request(span.resource, span.instrumentation_scope,
                                             ()) is not None:
            self.resource, self.scope = span.resource, span.instrumentation_scope
        if span.resource is not self.resource or span.instrumentation_scope is not self.scope:
            return span
        written = span_bytes(span)
        return span if written is None else written

    def bodies(self, batch: Sequence[Waiting]) -> list[tuple[bytes, int]]:
        """The requests' bodies and their spans: the spans written early in one, any
        others in another."""
        written = [w for w in batch if isinstance(w, bytes)]
        spans = [w for w in batch if not isinstance(w, bytes)]
        out = []
        if written and self.resource is not None:
            body = request(self.resource, self.scope, written)
            assert body is not None  # its resource and scope were checked in keep()
            out.append((body, len(written)))
        if spans:
            out.append((protobuf(spans), len(spans)))
        return out

    def _client(self) -> httpx.AsyncClient:
        """The client of the running loop (a client is bound to the loop it first ran on)."""
        loop = asyncio.get_running_loop()
        if self.client is None or self.loop is not loop:
            # A collector over plain http (a local agent or sidecar) needs no CA bundle:
            # loading one costs about 40 ms of CPU.
            self.client = httpx.AsyncClient(transport=self.transport, follow_redirects=False,
                                            verify=not self.endpoint.lower().startswith("http:"))
            self.loop = loop
        return self.client

    async def __call__(self, batch: Sequence[Waiting]) -> bool:
        sent = [await self._post(body, count) for body, count in self.bodies(batch)]
        return all(sent)

    async def _post(self, body: bytes, count: int) -> bool:
        if self.gzip:
            body = gzip.compress(body, compresslevel=6)
        client, deadline = self._client(), asyncio.get_running_loop().time() + self.timeout
        pause, code = 0.5, "unreachable"
        while True:
            left = deadline - asyncio.get_running_loop().time()
            try:
                answer = await client.post(self.endpoint, content=body, headers=self.headers,
                                           timeout=max(min(REQUEST_SECONDS, left), 0.1))
            except httpx.HTTPError as exc:
                code = type(exc).__name__
            else:
                if answer.status_code < 300:
                    return True
                code = f"http_{answer.status_code}"
                if answer.status_code not in _AGAIN:
                    break
            if deadline - asyncio.get_running_loop().time() < pause:
                break
            await asyncio.sleep(pause)
            pause *= 2
        logs.event("trace_lost", code=code, count=count)
        return False

    async def close(self) -> None:
        if self.client is not None and self.loop is asyncio.get_running_loop():
            await self.client.aclose()
        self.client = None


def handed_to(exporter: SpanExporter) -> Send:
    """An SDK exporter (a test's in-memory one) as a batch's sender: it takes spans."""
    async def send(batch: Sequence[Waiting]) -> bool:
        spans = [w for w in batch if isinstance(w, ReadableSpan)]
        return exporter.export(spans) is SpanExportResult.SUCCESS
    return send


def as_is(span: ReadableSpan) -> Waiting:
    return span


class LoopExport:
    """Finished spans, batched and sent from the event loop that made them."""

    def __init__(self, send: Send, config: Tracing,
                 keep: Callable[[ReadableSpan], Waiting] = as_is) -> None:
        self.send, self.keep, self.batch, self.queued = send, keep, config.batch, config.queued
        self.delay = config.delay
        self.waiting: list[Waiting] = []
        self.timer: asyncio.TimerHandle | None = None
        self.sending: asyncio.Task[None] | None = None
        self.flushing = False
        self.dropped = 0
        # The loop the timer and the sending task belong to (a test, or a platform that
        # runs each invocation in a loop of its own, may end one and start another).
        self.loop: asyncio.AbstractEventLoop | None = None

    def on_end(self, span: ReadableSpan) -> None:
        if len(self.waiting) >= self.queued:
            self.dropped += 1
            return
        self.waiting.append(self.keep(span))
        try:
            loop = self._on(asyncio.get_running_loop())
        except RuntimeError:
            return  # no loop here: the next batch or flush takes it
        if len(self.waiting) >= self.batch:
            self._start(loop)
        elif self.timer is None and self.sending is None:
            self.timer = loop.call_later(self.delay, self._start, loop)

    def _on(self, loop: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
        """`loop`, forgetting a timer and a task of a loop that is no longer running."""
        if loop is not self.loop:
            self.loop, self.timer, self.sending = loop, None, None
        return loop

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.sending is None and self.waiting:
            self.sending = loop.create_task(self._drain(loop))

    async def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """Send what waits, then every full batch that came meanwhile (one request in
        flight); a part batch left waits for the timer (or a flush)."""
        try:
            while self.waiting:
                spans, self.waiting = self.waiting[:self.batch], self.waiting[self.batch:]
                try:
                    await self.send(spans)
                except Exception as exc:  # tracing never fails the work it traces
                    logs.event("trace_lost", code=type(exc).__name__, count=len(spans))
                if self.dropped:
                    logs.event("trace_lost", code="queue_full", count=self.dropped)
                    self.dropped = 0
                if len(self.waiting) < self.batch and not self.flushing:
                    break
        finally:
            self.sending = None
            if self.waiting and self.timer is None and not loop.is_closed():
                self.timer = loop.call_later(self.delay, self._start, loop)

    async def flush(self, seconds: float) -> bool:
        """Send what waits now and wait (at most `seconds`) until it has left."""
        self.flushing = True
        try:
            loop = self._on(asyncio.get_running_loop())
            if self.sending is None:
                self._start(loop)
            if self.sending is None:
                return True
            done, _ = await asyncio.wait({self.sending}, timeout=seconds)
            return bool(done)
        finally:
            self.flushing = False

    def shutdown(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
