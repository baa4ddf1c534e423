"""Spans sent from the event loop (tracing/export.py): batches, the collector's answers, flush."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from aiqueue.settings.tracing import Tracing
from aiqueue.tracing import export, otlp
from aiqueue.tracing.export import LoopExport, OtlpHttp, Waiting

URL = "http://collector.test/v1/traces"
ONE = Resource.create({"service.name": "one"})


def span(n: int, **attributes: Any) -> ReadableSpan:
    return ReadableSpan("s", SpanContext(5, n + 1, False, TraceFlags(1)), None, ONE,
                        attributes or {"n": n}, start_time=1, end_time=2)


def sdk(spans: Sequence[ReadableSpan]) -> bytes:
    return bytes(encode_spans(spans).SerializeToString())


class Collector:
    """A collector that keeps each request and answers with the statuses given, then 200."""

    def __init__(self, *answers: int) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert str(request.url) == URL
        self.requests.append(request)
        return httpx.Response(self.answers.pop(0) if self.answers else 200)

    def bodies(self) -> list[bytes]:
        return [gzip.decompress(r.content) if r.headers.get("content-encoding") == "gzip"
                else r.content for r in self.requests]


def sender(collector: Collector, **config: Any) -> OtlpHttp:
    return OtlpHttp(Tracing(URL, headers=(("x-api-key", "k"),), **config),
                    httpx.MockTransport(collector))


async def test_a_batch_goes_as_encoded_here_else_as_the_sdk_encodes_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    encoded: list[bytes | None] = []
    ours = otlp.encode

    def counted(spans: Any) -> bytes | None:
        encoded.append(ours(spans))
        return encoded[-1]

    monkeypatch.setattr(export, "encode", counted)
    collector = Collector()
    send = sender(collector)
    plain, listed = span(1), span(2, listed=[1, 2])
    assert await send([plain]) and await send([listed])
    assert collector.bodies() == [sdk([plain]), sdk([listed])]
    assert encoded == [sdk([plain]), None]  # the list left to the SDK's encoder
    sent = collector.requests[0].headers
    assert sent["content-type"] == "application/x-protobuf" and sent["x-api-key"] == "k"
    await send.close()


async def test_a_span_is_written_as_it_ends_one_of_another_shape_kept_for_the_sdk() -> None:
    collector = Collector()
    send = sender(collector)
    plain, other, listed = span(1), span(2), span(3, listed=[1, 2])
    waiting = [send.keep(plain), send.keep(other), send.keep(listed)]
    assert [type(w) for w in waiting] == [bytes, bytes, ReadableSpan]
    assert await send(waiting)
    # The spans written early go in one request, the other in one of its own: as the
    # SDK would write each.
    assert collector.bodies() == [sdk([plain, other]), sdk([listed])]
    await send.close()


async def test_gzip_when_asked() -> None:
    collector = Collector()
    send = sender(collector, gzip=True)
    assert await send([span(1)])
    assert collector.requests[0].headers["content-encoding"] == "gzip"
    assert collector.bodies() == [sdk([span(1)])]
    await send.close()


async def test_a_busy_collector_gets_the_batch_again_a_refusal_drops_it(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(asyncio, "sleep", _no_wait)
    busy = Collector(503, 429)
    assert await sender(busy)([span(1)])
    assert len(busy.requests) == 3 and len(set(busy.bodies())) == 1
    refusing = Collector(400)
    with caplog.at_level(logging.INFO, logger="aiqueue"):
        assert not await sender(refusing)([span(1), span(2)])
    assert len(refusing.requests) == 1
    lost = [json.loads(r.getMessage()) for r in caplog.records]
    assert {"event": "trace_lost", "code": "http_400", "count": 2}.items() <= lost[-1].items()


async def test_a_collector_down_for_longer_than_the_timeout_loses_the_batch(
        caplog: pytest.LogCaptureFixture) -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    send = OtlpHttp(Tracing(URL, timeout=0.6), httpx.MockTransport(down))
    with caplog.at_level(logging.INFO, logger="aiqueue"):
        assert not await send([span(1)])
    assert json.loads(caplog.records[-1].getMessage())["code"] == "ConnectError"


async def _no_wait(seconds: float) -> None:
    return None


class Kept:
    """A sender that keeps each batch."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    async def __call__(self, batch: Sequence[Waiting]) -> bool:
        await asyncio.sleep(0)  # a request in flight: spans may come meanwhile
        self.batches.append([s.context.span_id - 1 for s in batch
                             if isinstance(s, ReadableSpan) and s.context])
        return True


async def test_a_full_batch_leaves_at_once_a_part_one_after_the_delay() -> None:
    kept = Kept()
    spans = LoopExport(kept, Tracing(URL, batch=3, delay=0.05))
    for n in range(7):
        spans.on_end(span(n))
    await asyncio.sleep(0.01)
    assert kept.batches == [[0, 1, 2], [3, 4, 5]]  # the seventh waits for the delay
    await asyncio.sleep(0.1)
    assert kept.batches == [[0, 1, 2], [3, 4, 5], [6]]


async def test_flush_sends_every_span_waiting_and_waits_for_it() -> None:
    kept = Kept()
    spans = LoopExport(kept, Tracing(URL, batch=2, delay=60))
    for n in range(5):
        spans.on_end(span(n))
    assert await spans.flush(1.0)
    assert kept.batches == [[0, 1], [2, 3], [4]]
    assert await spans.flush(1.0)  # nothing waits
    spans.shutdown()


async def test_spans_past_the_queue_are_dropped_and_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    kept = Kept()
    spans = LoopExport(kept, Tracing(URL, batch=100, queued=4, delay=60))
    for n in range(6):
        spans.on_end(span(n))
    with caplog.at_level(logging.INFO, logger="aiqueue"):
        await spans.flush(1.0)
    assert kept.batches == [[0, 1, 2, 3]]
    assert {"code": "queue_full", "count": 2}.items() <= \
        json.loads(caplog.records[-1].getMessage()).items()


def test_a_span_ended_where_no_loop_runs_waits_for_the_next_flush() -> None:
    kept = Kept()
    spans = LoopExport(kept, Tracing(URL, batch=1, delay=0))
    spans.on_end(span(0))
    assert kept.batches == [] and len(spans.waiting) == 1
    asyncio.run(spans.flush(1.0))
    assert kept.batches == [[0]]


async def test_a_sender_that_raises_loses_its_batch_not_the_next(
        caplog: pytest.LogCaptureFixture) -> None:
    sent: list[int] = []

    async def flaky(spans: Sequence[Waiting]) -> bool:
        if not sent:
            sent.append(0)
            raise OSError("boom")
        sent.append(len(spans))
        return True

    spans = LoopExport(flaky, Tracing(URL, batch=2, delay=60))
    with caplog.at_level(logging.INFO, logger="aiqueue"):
        for n in range(4):
            spans.on_end(span(n))
        await spans.flush(1.0)
    assert sent == [0, 2]
    assert any(json.loads(r.getMessage()).get("code") == "OSError" for r in caplog.records)


def test_a_new_event_loop_sends_what_an_ended_one_left() -> None:
    sent: list[int] = []

    async def send(spans: Sequence[Waiting]) -> bool:
        if not sent:  # the first batch's request never ends: its loop is closed under it
            sent.append(0)
            await asyncio.get_running_loop().create_future()
        sent.append(len(spans))
        return True

    spans = LoopExport(send, Tracing(URL, batch=1, delay=60))
    ended = asyncio.new_event_loop()

    async def one() -> None:
        spans.on_end(span(0))
        await asyncio.sleep(0.01)

    ended.run_until_complete(one())
    ended.close()  # as a platform's invocation ends: its task never finishes
    spans.waiting.append(span(1))
    asyncio.run(spans.flush(1.0))
    assert sent == [0, 1]
