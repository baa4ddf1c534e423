"""The spans' OTLP protobuf written directly (docs/tracing.md).

The SDK's encoder builds a protobuf object per span, attribute and value: about
30 µs a span, on the event loop that sends the batch (tracing/export.py).
`encode` writes the same bytes (ExportTraceServiceRequest,
tests/unit/test_tracing_otlp.py compares them with the SDK's) for the spans
aiqueue makes: one resource, one scope, scalar attributes, no events.  A batch of
any other shape is encoded by the SDK.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

# OTLP's span kinds (trace.proto's SpanKind), by the API's.
_KINDS = {SpanKind.INTERNAL: 1, SpanKind.SERVER: 2, SpanKind.CLIENT: 3,
          SpanKind.PRODUCER: 4, SpanKind.CONSUMER: 5}
# Span.flags and Link.flags: whether the parent's (the link's) is_remote is known, and is.
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
_U64 = (1 << 64) - 1
_fixed64 = struct.Struct("<Q").pack
_double = struct.Struct("<d").pack
_fixed32 = struct.Struct("<I").pack


_SMALL = [bytes((n,)) for n in range(0x80)]


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag, its length, its bytes."""
    n = len(payload)
    return tag + (_SMALL[n] if n < 0x80 else _varint(n)) + payload


_names: dict[str, bytes] = {}


def _text(tag: bytes, text: str) -> bytes:
    """A string field; the few names and keys aiqueue uses are encoded once."""
    done = _names.get(text)
    if done is None:
        done = _varint(len(raw := text.encode())) + raw
        if len(_names) < 1024:
            _names[text] = done
    return tag + done


def _value(value: Any) -> bytes | None:
    """An AnyValue of a scalar (None: a kind this encoder leaves to the SDK)."""
    cls = value.__class__
    if cls is str:
        return _field(b"\x0a", value.encode())
    if cls is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if cls is int and -(1 << 63) <= value < 1 << 63:
        return b"\x18" + _varint(value & _U64)
    if cls is float:
        return b"\x21" + _double(value)
    return None


# KeyValue fields already written, by tag, key and value: a job's queue_id, kind and
# pool are on each of its spans, outcomes and models on most.  Emptied when full.
_pairs: dict[tuple[bytes, str, type, Any], bytes] = {}
_PAIRS = 8192
_SCALARS = frozenset((str, bool, int, float))


def _attributes(tag: bytes, attributes: Mapping[str, Any] | None) -> bytes | None:
    """Each attribute as a KeyValue field `tag`."""
    if not attributes:
        return b""
    out = []
    for key, value in attributes.items():
        if value.__class__ not in _SCALARS:
            return None
        pair = (tag, key, value.__class__, value)
        done = _pairs.get(pair)
        if done is None:
            encoded = _value(value)
            if encoded is None:
                return None
            done = _field(tag, (_text(b"\x0a", key) if key else b"") + _field(b"\x12", encoded))
            if len(_pairs) >= _PAIRS:
                _pairs.clear()
            _pairs[pair] = done
        out.append(done)
    return b"".join(out)


def _link(link: Link) -> bytes | None:
    context = link.context
    attributes = _attributes(b"\x22", link.attributes)
    if attributes is None or context.trace_state:
        return None
    flags = _HAS_IS_REMOTE | (_IS_REMOTE if context.is_remote else 0)
    return _field(b"\x6a", b"\x0a\x10" + context.trace_id.to_bytes(16, "big") + b"\x12\x08"
                  + context.span_id.to_bytes(8, "big") + attributes + b"\x35" + _fixed32(flags))


def _head(name: str, kind: SpanKind) -> bytes:
    """A span's name and kind fields."""
    return _text(b"\x2a", name) + b"\x30" + _SMALL[_KINDS[kind]]


def _tail(status: Status, remote: bool) -> bytes:
    """A span's status and flags fields."""
    message = _field(b"\x12", status.description.encode()) if status.description else b""
    code = status.status_code.value
    return (_field(b"\x7a", message + (b"\x18" + _varint(code) if code else b""))
            + b"\x85\x01" + _fixed32(_HAS_IS_REMOTE | (_IS_REMOTE if remote else 0)))


# Heads and tails already written: aiqueue's spans have four names and a few statuses.
_heads: dict[tuple[str, SpanKind], bytes] = {}
_tails: dict[tuple[StatusCode, str | None, bool], bytes] = {}


def span_bytes(span: ReadableSpan) -> bytes | None:
    """One span as its field of a ScopeSpans message, fields in number order as protobuf
    writes them; None when this encoder does not know its shape (tracing/export.py then
    keeps the span for the SDK's encoder)."""
    context, parent, start, end = span.context, span.parent, span.start_time, span.end_time
    attributes = _attributes(b"\x4a", span.attributes)
    if context is None or attributes is None or span.events or start is None or end is None:
        return None
    # aiqueue's spans (tracing/otel.py) are ReadableSpans of plain dicts: nothing dropped.
    if span.__class__ is not ReadableSpan and (span.dropped_attributes or span.dropped_links):
        return None
    links = b""
    for link in span.links:
        encoded = _link(link)
        if encoded is None:
            return None
        links += encoded
    state = context.trace_state
    head_key = (span.name, span.kind)
    if (head := _heads.get(head_key)) is None:
        head = _head(*head_key)
        if len(_heads) < 64:
            _heads[head_key] = head
    status, remote = span.status, parent is not None and parent.is_remote
    tail_key = (status.status_code, status.description, remote)
    if (tail := _tails.get(tail_key)) is None:
        tail = _tail(status, remote)
        if len(_tails) < 64:
            _tails[tail_key] = tail
    return _field(b"\x12", b"".join((
        b"\x0a\x10", context.trace_id.to_bytes(16, "big"),
        b"\x12\x08", context.span_id.to_bytes(8, "big"),
        _field(b"\x1a", ",".join(f"{k}={v}" for k, v in state.items()).encode())
        if state else b"",
        b"\x22\x08" + parent.span_id.to_bytes(8, "big") if parent is not None else b"",
        head, b"\x39", _fixed64(start), b"\x41", _fixed64(end), attributes, links, tail)))


def _scope(scope: InstrumentationScope | None) -> bytes | None:
    if scope is None:
        return b""
    attributes = _attributes(b"\x1a", scope.attributes)
    if attributes is None:
        return None
    return (_text(b"\x0a", scope.name) if scope.name else b"") + \
        (_text(b"\x12", scope.version) if scope.version else b"") + attributes


def _resource(resource: Resource) -> bytes | None:
    return _attributes(b"\x0a", resource.attributes)


def request(resource: Resource, scope: InstrumentationScope | None,
            spans: Sequence[bytes]) -> bytes | None:
    """An ExportTraceServiceRequest of spans already written by `span_bytes`, all of one
    resource and scope; None when the resource or the scope is not of a known shape."""
    head_resource, head_scope = _resource(resource), _scope(scope)
    if head_resource is None or head_scope is None:
        return None
    scope_spans = _field(b"\x0a", head_scope) + b"".join(spans)
    if scope is not None and scope.schema_url:
        scope_spans += _text(b"\x1a", scope.schema_url)
    resource_spans = _field(b"\x0a", head_resource) + _field(b"\x12", scope_spans)
    if resource.schema_url:
        resource_spans += _text(b"\x1a", resource.schema_url)
    return _field(b"\x0a", resource_spans)


def encode(spans: Sequence[ReadableSpan]) -> bytes | None:
    """An ExportTraceServiceRequest of `spans`, byte for byte as the SDK's encoder
    writes it; None when the batch is not of the shape this encoder knows."""
    if not spans:
        return None
    resource, scope = spans[0].resource, spans[0].instrumentation_scope
    out = []
    for span in spans:
        if span.resource is not resource or span.instrumentation_scope is not scope:
            return None
        encoded = span_bytes(span)
        if encoded is None:
            return None
        out.append(encoded)
    return request(resource, scope, out)
