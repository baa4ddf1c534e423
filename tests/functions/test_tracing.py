"""The reference function's span (docs/tracing.md): off by default, under the dispatch's
traceparent when on, and nothing of a student's on it."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from functions.ai_mark import tracing
from functions.ai_mark.tracing_otel import OtelTracer

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
DISPATCH = {"queue_id": "5f0c1d1e-0000-4000-8000-000000000001", "attempt": 2,
            "content": "the student's answer", "callback_token": "tok"}
ITEM = {"queue_id": DISPATCH["queue_id"], "token": "tok", "status": "completed",
        "result": {"score": 3, "feedback": "Good answer about osmosis"},
        "usage": {"model": "simulator", "prompt_tokens": 40, "completion_tokens": 9}}


def test_off_without_an_endpoint_or_when_disabled() -> None:
    assert type(tracing.from_env({})) is tracing.Tracer
    assert type(tracing.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                                  "OTEL_SDK_DISABLED": "true"})) is tracing.Tracer
    tracing.Tracer().start(PARENT, DISPATCH).end(ITEM)  # a no-op


def test_the_marking_span_joins_the_dispatch_and_carries_no_content() -> None:
    exporter = InMemorySpanExporter()
    tracer = OtelTracer(exporter)
    tracer.start(PARENT, DISPATCH).end(ITEM)
    tracer.close()
    (span,) = exporter.get_finished_spans()
    assert span.name == "ai_mark.mark"
    assert f"{span.context.trace_id:032x}" == PARENT.split("-")[1]
    assert span.parent is not None and f"{span.parent.span_id:016x}" == PARENT.split("-")[2]
    assert span.attributes == {
        "aiqueue.queue_id": DISPATCH["queue_id"], "aiqueue.attempt": 2,
        "ai_mark.status": "completed", "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "simulator", "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 9}


def test_a_failed_marking_is_an_error_with_its_code() -> None:
    exporter = InMemorySpanExporter()
    tracer = OtelTracer(exporter)
    tracer.start(None, DISPATCH).end({"status": "failed", "error": "model_timeout"})
    tracer.close()
    (span,) = exporter.get_finished_spans()
    assert span.parent is None and (span.attributes or {})["error.type"] == "model_timeout"
    assert span.status.status_code.name == "ERROR"
