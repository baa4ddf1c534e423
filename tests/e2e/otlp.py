"""A small OTLP/HTTP receiver on loopback: POST /v1/traces in protobuf, decoded and kept."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.e2e.servers import free_port, run_asgi

PROTOBUF = "application/x-protobuf"


def value(v: AnyValue) -> Any:
    """An attribute's value as Python."""
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, as the receiver decoded it."""

    service: str
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    attributes: dict[str, Any]
    start_ns: int = 0
    end_ns: int = 0


class OtlpReceiver:
    """Keeps every span exported to it, and each request's whole decoded text."""

    def __init__(self) -> None:
        self.port = free_port()
        self.spans: list[ReceivedSpan] = []
        # Every request as protobuf text: each attribute, event, status message, resource.
        self.texts: list[str] = []
        self.content_types: set[str] = set()
        self.lock = threading.Lock()
        self.app = Starlette(routes=[Route("/v1/traces", self.traces, methods=["POST"])])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def traces(self, request: Request) -> Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.body())
        spans = []
        for resource_spans in message.resource_spans:
            resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    spans.append(ReceivedSpan(
                        str(resource.get("service.name")), s.trace_id.hex(), s.span_id.hex(),
                        s.parent_span_id.hex(), s.name,
                        {a.key: value(a.value) for a in s.attributes},
                        s.start_time_unix_nano, s.end_time_unix_nano))
        with self.lock:
            self.spans.extend(spans)
            self.texts.append(str(message))
            self.content_types.add(request.headers.get("content-type", ""))
        return Response(ExportTraceServiceResponse().SerializeToString(), media_type=PROTOBUF)

    def snapshot(self) -> list[ReceivedSpan]:
        with self.lock:
            return list(self.spans)

    @contextmanager
    def running(self) -> Iterator[OtlpReceiver]:
        with run_asgi(self.app, self.port):
            yield self
