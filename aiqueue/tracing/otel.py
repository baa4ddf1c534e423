"""The OpenTelemetry SDK's side of tracing (docs/tracing.md): imported only when it is on.

Spans are batched (BatchSpanProcessor) and exported over OTLP/HTTP in
protobuf from a thread of their own, so the loop only hands each one over.

What a span may carry (nothing of a student's, tests/unit/test_tracing.py
checks it): ids (queue_id), counts, codes from a fixed vocabulary, the
kind, the pool, the model's name and the cost.  Never a payload, an answer,
a result, feedback, a question, an error's text or a token.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider, sampling
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import (
    Link,
    Span,
    SpanKind,
    Status,
    StatusCode,
    get_current_span,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from aiqueue import logs
from aiqueue.models import Job, QueueId
from aiqueue.settings.tracing import Tracing
from aiqueue.tracing import NO_SPAN, Applied, DispatchSpan, JobTrace, Tracer, TraceStore, clock

# Jobs' traces this instance knows without asking the database (enqueued or seen here).
KNOWN_TRACES = 20_000
# Spans still unsent when a Vercel invocation ends wait at most this long.
FLUSH_MILLIS = 2_000
_W3C = TraceContextTextMapPropagator()


def sampler(config: Tracing) -> sampling.Sampler:
    """OTEL_TRACES_SAMPLER (and its ratio) as the SDK's sampler."""
    ratio = sampling.TraceIdRatioBased(config.ratio)
    return {
        "always_on": sampling.ALWAYS_ON,
        "always_off": sampling.ALWAYS_OFF,
        "traceidratio": ratio,
        "parentbased_always_on": sampling.ParentBased(sampling.ALWAYS_ON),
        "parentbased_always_off": sampling.ParentBased(sampling.ALWAYS_OFF),
        "parentbased_traceidratio": sampling.ParentBased(ratio),
    }[config.sampler]


class HashedOnce(Resource):
    """The instance's resource, hashed once.

    The OTLP encoder groups each batch's spans by resource, and the SDK's
    Resource.__hash__ dumps every attribute to JSON on each call: once per span,
    about a fifth of tracing's CPU here (bench --only traces).  A resource never
    changes once made, so its hash is kept.
    """

    def __init__(self, made: Resource) -> None:
        super().__init__(made.attributes, made.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return other is self or super().__eq__(other)


def provider(config: Tracing, exporter: SpanExporter | None = None) -> TracerProvider:
    """A provider of our own (the process's global one is left to the host)."""
    resource = HashedOnce(Resource.create({**dict(config.resource),
                                           SERVICE_NAME: config.service_name}))
    made = TracerProvider(sampler=sampler(config), resource=resource)
    made.add_span_processor(BatchSpanProcessor(exporter or OTLPSpanExporter(
        endpoint=config.endpoint, headers=dict(config.headers))))
    return made


def result_attributes(result: Applied) -> dict[str, Any]:
    """The result's span: the GenAI conventions' model and token counts, the cost, the codes."""
    usage = result.usage or {}
    attrs: dict[str, Any] = {"aiqueue.queue_id": str(result.queue_id),
                             "aiqueue.attempt": result.attempt,
                             "aiqueue.outcome": result.outcome,
                             "aiqueue.applied": result.applied}
    for key, name in (("model", "gen_ai.request.model"),
                      ("prompt_tokens", "gen_ai.usage.input_tokens"),
                      ("completion_tokens", "gen_ai.usage.output_tokens"),
                      ("cache_read_tokens", "gen_ai.usage.cache_read.input_tokens"),
                      ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens")):
        if usage.get(key) is not None:
            attrs[name] = usage[key]
    if "model" in usage:
        attrs["gen_ai.response.model"] = usage["model"]
    if result.cost_usd is not None:
        attrs["aiqueue.cost_usd"] = result.cost_usd
    if result.error_code is not None:
        attrs["error.type"] = result.error_code
    return attrs


@dataclass(frozen=True)
class Known:
    """A job's trace as this instance knows it, with its root as a parent context."""

    trace: JobTrace
    parent: Context


class OtelSpan(DispatchSpan):
    def __init__(self, span: Span) -> None:
        self.span = span
        self.headers: dict[str, str] = {}
        _W3C.inject(self.headers, context=set_span_in_context(span))

    def end(self, outcome: str, code: str | None = None,
            http_status: int | None = None) -> None:
        self.span.set_attribute("aiqueue.outcome", outcome)
        if http_status is not None:
            self.span.set_attribute("http.response.status_code", http_status)
        if code is not None:
            self.span.set_attribute("error.type", code)
            self.span.set_status(Status(StatusCode.ERROR))
        self.span.end()


class OtelTracer(Tracer):
    """Tracing on: each job's spans, under the trace its enqueue began."""

    on = True

    def __init__(self, config: Tracing, exporter: SpanExporter | None = None) -> None:
        self.provider = provider(config, exporter)
        self.tracer = self.provider.get_tracer("aiqueue")
        # Each job's trace and its root as a parent, parsed once per instance; None: the
        # job has none (enqueued while tracing was off, or not sampled), asked once.
        self.known: OrderedDict[QueueId, Known | None] = OrderedDict()

    def now(self) -> int:
        return clock()

    def _know(self, queue_id: QueueId, known: Known | None) -> None:
        self.known[queue_id] = known
        if len(self.known) > KNOWN_TRACES:
            self.known.popitem(last=False)

    async def _traces(self, store: TraceStore, ids: Sequence[QueueId]) -> dict[QueueId, Known]:
        """The jobs' traces: known here, else from their rows (a job enqueued
        before tracing was on, or not sampled, has none)."""
        missing = [q for q in ids if q not in self.known]
        if missing:
            try:
                rows = await store.job_traces(missing)
            except Exception as exc:
                # Tracing never fails the work it traces: these spans are lost, not the job.
                logs.event("trace_lost", code=type(exc).__name__, count=len(missing))
            else:
                for queue_id in missing:
                    trace = rows.get(queue_id)
                    self._know(queue_id, None if trace is None else Known(
                        trace, _W3C.extract({"traceparent": trace.traceparent})))
        return {q: known for q in ids if (known := self.known.get(q)) is not None}

    def _span(self, name: str, known: Known, kind: SpanKind, started: int,
              attributes: dict[str, Any]) -> Span:
        trace = known.trace
        return self.tracer.start_span(name, context=known.parent, kind=kind, start_time=started,
                                      attributes={"aiqueue.kind": trace.kind,
                                                  "aiqueue.pool": trace.pool, **attributes})

    async def enqueued(self, store: TraceStore, queue_ids: Sequence[QueueId], started: int,
                       *, kind: str, pool: str, caller: str | None = None) -> None:
        # One trace per job: the host's request is a link, not a parent.
        host = get_current_span(_W3C.extract({"traceparent": caller})).get_span_context() \
            if caller else None
        links = [Link(host)] if host is not None and host.is_valid else None
        kept: dict[QueueId, JobTrace] = {}
        parents: dict[QueueId, Context] = {}
        ended = clock()
        for queue_id in queue_ids:
            span = self.tracer.start_span(
                "aiqueue.enqueue", context=Context(), kind=SpanKind.PRODUCER,
                start_time=started, links=links, attributes={"aiqueue.queue_id": str(queue_id),
                                                "aiqueue.kind": kind, "aiqueue.pool": pool})
            span.end(end_time=ended)
            if span.get_span_context().trace_flags.sampled:
                carrier: dict[str, str] = {}
                parents[queue_id] = set_span_in_context(span)
                _W3C.inject(carrier, context=parents[queue_id])
                kept[queue_id] = JobTrace(carrier["traceparent"], kind, pool)
        if kept:
            try:
                await store.keep_traces(kept)
            except Exception as exc:
                logs.event("trace_lost", code=type(exc).__name__, count=len(kept))
                return
        for queue_id in queue_ids:  # an unsampled job has no trace: no need to ask
            trace = kept.get(queue_id)
            self._know(queue_id, None if trace is None else Known(trace, parents[queue_id]))

    async def claimed(self, store: TraceStore, jobs: Sequence[Job], started: int) -> None:
        traces = await self._traces(store, [job.queue_id for job in jobs])
        ended = clock()
        for job in jobs:
            known = traces.get(job.queue_id)
            if known is None:
                continue
            if known.trace.pool != job.pool:  # on its kind's fallback
                known = Known(replace(known.trace, pool=job.pool), known.parent)
                self._know(job.queue_id, known)
            self._span("aiqueue.claim", known, SpanKind.INTERNAL, started,
                       {"aiqueue.queue_id": str(job.queue_id),
                        "aiqueue.attempt": job.attempt}).end(end_time=ended)

    async def dispatching(self, store: TraceStore, job: Job) -> DispatchSpan:
        known = (await self._traces(store, [job.queue_id])).get(job.queue_id)
        if known is None:
            return NO_SPAN
        return OtelSpan(self._span("aiqueue.dispatch", known, SpanKind.CLIENT, clock(),
                                   {"aiqueue.queue_id": str(job.queue_id),
                                    "aiqueue.attempt": job.attempt}))

    async def applied(self, store: TraceStore, results: Sequence[Applied], started: int,
                      claimed: Sequence[Job] = ()) -> None:
        traces = await self._traces(store, [r.queue_id for r in results])
        ended = clock()
        for result in results:
            known = traces.get(result.queue_id)
            if known is None:
                continue
            span = self._span("aiqueue.result", known, SpanKind.CONSUMER, started,
                              result_attributes(result))
            if result.error_code is not None:
                span.set_status(Status(StatusCode.ERROR))
            span.end(end_time=ended)
        if claimed:
            await self.claimed(store, claimed, started)

    def flush(self) -> None:
        self.provider.force_flush(FLUSH_MILLIS)

    def close(self) -> None:
        self.provider.shutdown()

