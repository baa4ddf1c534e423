"""The spans' protobuf written directly (tracing/otlp.py): byte for byte the SDK's encoding."""

from __future__ import annotations

from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from aiqueue.models import QueueId
from aiqueue.settings.tracing import Tracing
from aiqueue.tracing import Applied
from aiqueue.tracing.otel import OtelTracer
from aiqueue.tracing.otlp import encode
from tests.unit.fakes import FakeStore, make_job

HOST = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
USAGE = {"model": "claude-haiku-4-5", "prompt_tokens": 1200, "completion_tokens": 80,
         "cache_read_tokens": 1000, "cache_write_tokens": 0}


def sdk(spans: list[Any]) -> bytes:
    return bytes(encode_spans(spans).SerializeToString())


async def a_jobs_spans() -> list[Any]:
    """Every span aiqueue makes, in this instance and in another (a remote parent)."""
    store, job = FakeStore(), make_job()
    exported: list[Any] = []
    for caller in (HOST, None):
        exporter = InMemorySpanExporter()
        here = OtelTracer(Tracing("http://unused", resource=(("team", "a b"),)), exporter)
        await here.enqueued(store, [job.queue_id], here.now(), kind="mark", pool="default",
                            caller=caller)
        there = OtelTracer(Tracing("http://unused"), exporter)
        await there.claimed(store, [job], there.now())
        (await there.dispatching(store, job)).end("failed", "http_500", 500)
        await there.applied(store, [
            Applied(QueueId(job.queue_id), 2, "completed", True, USAGE, cost_usd=0.0012),
            Applied(QueueId(job.queue_id), 3, "failed", False, None, error_code="function:x")],
            there.now())
        await here.flush()
        await there.flush()
        exported += exporter.get_finished_spans()
    return exported


async def test_aiqueues_spans_are_encoded_as_the_sdk_encodes_them() -> None:
    spans = await a_jobs_spans()
    assert {s.name for s in spans} == {"aiqueue.enqueue", "aiqueue.claim", "aiqueue.dispatch",
                                       "aiqueue.result"}
    assert any(s.links for s in spans) and any(s.parent and s.parent.is_remote for s in spans)
    assert any(s.status.status_code is StatusCode.ERROR for s in spans)
    # Each tracer's batch (one resource) as its processor hands it over.
    batches: dict[int, list[Any]] = {}
    for span in spans:
        batches.setdefault(id(span.resource), []).append(span)
    assert len(batches) == 4
    for batch in batches.values():
        assert encode(batch) == sdk(batch)


def test_every_scalar_a_status_message_and_a_link_are_encoded_as_the_sdk_does() -> None:
    resource = Resource.create({"service.name": "x", "n": -5, "f": 0.5, "b": False})
    context = SpanContext(1 << 100, 7, False, TraceFlags(1))
    parent = SpanContext(1 << 100, 9, True, TraceFlags(1))
    link = Link(SpanContext(3, 4, True, TraceFlags(1)), {"why": "host"})
    span = ReadableSpan("n", context, parent, resource,
                        {"s": "", "big": 2**62, "neg": -(2**63), "zero": 0, "t": True,
                         "pi": 3.14159, "long": "é" * 300},
                        (), (link,), SpanKind.SERVER, None, Status(StatusCode.ERROR, "code_x"),
                        10, 2**63 + 1, None)
    assert encode([span]) == sdk([span])


def test_a_batch_of_another_shape_is_left_to_the_sdk() -> None:
    context = SpanContext(5, 6, False, TraceFlags(1))
    one = Resource.create({"service.name": "one"})

    def span(**kw: Any) -> ReadableSpan:
        args: dict[str, Any] = {"name": "s", "context": context, "resource": one,
                                "start_time": 1, "end_time": 2, **kw}
        return ReadableSpan(**args)

    assert encode([span(attributes={"list": [1, 2]})]) is None
    assert encode([span(attributes={"huge": 2**64})]) is None
    assert encode([span(events=[Event("e", {}, 1)])]) is None
    assert encode([span(), span(resource=Resource.create({"service.name": "two"}))]) is None
    assert encode([span(end_time=None)]) is None
    assert encode([]) is None
    # The SDK's own spans (bounded attributes and lists) are encoded as well.
    exporter = InMemorySpanExporter()
    made = TracerProvider(resource=one)
    made.add_span_processor(SimpleSpanProcessor(exporter))
    with made.get_tracer("t").start_as_current_span("sdk", attributes={"a": 1}):
        pass
    finished = list(exporter.get_finished_spans())
    assert encode(finished) == sdk(finished)
