"""The function's own span, joined to the queue's trace (docs/tracing.md); optional.

With `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
set and the OpenTelemetry SDK installed (`opentelemetry-sdk` and
`opentelemetry-exporter-otlp-proto-http`: optional for this function), each
dispatch gets a span, `ai_mark.mark`, under the queue's dispatch span that
its W3C `traceparent` header names.  The other `OTEL_*` variables (service
name, resource attributes, sampler) are the SDK's own.  Otherwise nothing of
OpenTelemetry is imported and every call returns at once.

A span carries ids, the model, token counts and a fixed error code: never the
answer, the feedback, the question or a token.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

# The result item's usage fields, as the GenAI semantic conventions name them.
_USAGE = (("prompt_tokens", "gen_ai.usage.input_tokens"),
          ("completion_tokens", "gen_ai.usage.output_tokens"),
          ("cache_read_tokens", "gen_ai.usage.cache_read.input_tokens"),
          ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens"))


class Span:
    """A marking's span (off: nothing)."""

    def end(self, item: Mapping[str, Any]) -> None:
        """End it with what the item says: completed or failed, model, counts, code."""


class Tracer:
    """Tracing off: spans that record nothing."""

    on = False

    def start(self, traceparent: str | None, dispatch: Mapping[str, Any]) -> Span:
        """A marking's span under the dispatch's `traceparent` (a new trace without one)."""
        return Span()

    def close(self) -> None:
        """Send what is pending and stop."""


def item_attributes(item: Mapping[str, Any]) -> dict[str, Any]:
    """The span's attributes from a result item: status, model, token counts, error code."""
    attrs: dict[str, Any] = {"ai_mark.status": str(item.get("status") or "crashed")}
    usage = item.get("usage")
    if isinstance(usage, Mapping):
        if isinstance(usage.get("model"), str):
            attrs["gen_ai.request.model"] = usage["model"][:100]
            attrs["gen_ai.operation.name"] = "chat"
        for key, name in _USAGE:
            if isinstance(usage.get(key), int):
                attrs[name] = usage[key]
    if item.get("status") == "failed" and isinstance(item.get("error"), str):
        attrs["error.type"] = item["error"]  # a code of a fixed list (errors.py)
    return attrs


def from_env(env: Mapping[str, str] | None = None) -> Tracer:
    """The SDK's tracer when an endpoint is set and the SDK is installed; else the no-op one."""
    env = os.environ if env is None else env
    endpoint = (env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
                or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip())
    if not endpoint or env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return Tracer()
    try:
        from .tracing_otel import OtelTracer
    except ImportError:
        log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is not "
                    "installed: no spans")
        return Tracer()
    return OtelTracer()
