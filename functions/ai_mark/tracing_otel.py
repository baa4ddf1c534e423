"""The function's spans with the OpenTelemetry SDK: imported only when tracing is on."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Span as OtelSpan
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .job import safe_id
from .tracing import Span, Tracer, item_attributes

_W3C = TraceContextTextMapPropagator()


class MarkingSpan(Span):
    def __init__(self, span: OtelSpan) -> None:
        self.span = span

    def end(self, item: Mapping[str, Any]) -> None:
        attrs = item_attributes(item)
        self.span.set_attributes(attrs)
        if "error.type" in attrs:
            self.span.set_status(Status(StatusCode.ERROR))
        self.span.end()


class OtelTracer(Tracer):
    """Spans exported over OTLP/HTTP, configured by the SDK's own OTEL_* variables."""

    on = True

    def __init__(self, exporter: SpanExporter | None = None) -> None:
        # Resource.create adds OTEL_RESOURCE_ATTRIBUTES; the name is OTEL_SERVICE_NAME's.
        name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or "ai-mark"
        self.provider = TracerProvider(resource=Resource.create({"service.name": name}))
        self.provider.add_span_processor(BatchSpanProcessor(exporter or OTLPSpanExporter()))
        self.tracer = self.provider.get_tracer("functions.ai_mark")

    def start(self, traceparent: str | None, dispatch: Mapping[str, Any]) -> Span:
        parent = _W3C.extract({"traceparent": traceparent}) if traceparent else None
        attempt = dispatch.get("attempt")
        span = self.tracer.start_span(
            "ai_mark.mark", context=parent, kind=SpanKind.SERVER,
            attributes={"aiqueue.queue_id": safe_id(dispatch.get("queue_id")),
                        "aiqueue.attempt": attempt if isinstance(attempt, int) else 0})
        return MarkingSpan(span)

    def close(self) -> None:
        self.provider.shutdown()
