"""The OpenTelemetry SDK's side of tracing (docs/tracing.md): imported only when it is on.

A span is made when its work is over, as the SDK's `ReadableSpan` the exporters
take, with the SDK's sampler, id generator and resource, and handed to
tracing/export.py, which batches the spans and sends them over OTLP/HTTP in
protobuf (tracing/otlp.py) from the event loop.  The SDK's `Tracer` would do
the same for about 50 µs a span (a lock, bounded lists and attributes checked
one by one, for spans that are never changed once made); this takes a few, so
that tracing every job stays within the loop's budget (docs/performance.md#tracing).

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

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider, sampling
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    get_current_span,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from aiqueue import logs
from aiqueue.models import Job, QueueId
from aiqueue.settings.tracing import Tracing
from aiqueue.tracing import NO_SPAN, Applied, DispatchSpan, JobTrace, Tracer, TraceStore, clock
from aiqueue.tracing.export import LoopExport, OtlpHttp, handed_to
from aiqueue.tracing.pipeline import instance_resource, sampler

# Jobs' traces this instance knows without asking the database (enqueued or seen here).
KNOWN_TRACES = 20_000
# Spans still unsent when a Vercel invocation ends wait at most this long.
FLUSH_SECONDS = 2.0
_W3C = TraceContextTextMapPropagator()
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_UNSET, _ERROR = Status(StatusCode.UNSET), Status(StatusCode.ERROR)
_KEEP = sampling.Decision.RECORD_AND_SAMPLE
_ASK: Any = object()  # a job this instance has not seen: its row is asked


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
    """A job's trace as this instance knows it: its root's context, the attributes every
    span of the job carries (queue_id, kind, pool)."""

    trace: JobTrace
    parent: SpanContext
    common: dict[str, Any]


def known(queue_id: QueueId, trace: JobTrace, parent: SpanContext) -> Known:
    return Known(trace, parent, {"aiqueue.queue_id": str(queue_id), "aiqueue.kind": trace.kind,
                                 "aiqueue.pool": trace.pool})


class OtelSpan(DispatchSpan):
    """A dispatch under way: its context, carried to the function, made a span at its end."""

    def __init__(self, tracer: OtelTracer, job: Known, attempt: int) -> None:
        self.tracer, self.job, self.attempt, self.started = tracer, job, attempt, clock()
        parent = job.parent
        self.context = SpanContext(parent.trace_id, tracer.ids.generate_span_id(), False,
                                   parent.trace_flags, parent.trace_state)
        self.headers: dict[str, str] = {"traceparent": f"00-{parent.trace_id:032x}-"
                                        f"{self.context.span_id:016x}-{parent.trace_flags:02x}"}
        if parent.trace_state:
            self.headers["tracestate"] = parent.trace_state.to_header()

    def end(self, outcome: str, code: str | None = None,
            http_status: int | None = None) -> None:
        attributes = {**self.job.common, "aiqueue.attempt": self.attempt,
                      "aiqueue.outcome": outcome}
        if http_status is not None:
            attributes["http.response.status_code"] = http_status
        if code is not None:
            attributes["error.type"] = code
        self.tracer.emit("aiqueue.dispatch", SpanKind.CLIENT, self.context, self.job.parent,
                         self.started, clock(), attributes, _UNSET if code is None else _ERROR)


class OtelTracer(Tracer):
    """Tracing on: each job's spans, under the trace its enqueue began."""

    on = True

    def __init__(self, config: Tracing, exporter: SpanExporter | None = None) -> None:
        self.resource = instance_resource(config)
        self.scope = InstrumentationScope("aiqueue")
        # A provider of our own (the process's global one is left to the host), for its
        # sampler and ids; the spans go to the batches of tracing/export.py.
        provider = TracerProvider(sampler=sampler(config), resource=self.resource)
        self.sampler, self.ids = provider.sampler, provider.id_generator
        self.sender: OtlpHttp | None = None
        if exporter is not None:
            self.processor = LoopExport(handed_to(exporter), config)
        else:
            self.sender = sender = OtlpHttp(config)
            self.processor = LoopExport(sender, config, sender.keep)
        # These two sample every job: no need to ask them each time.
        self.always = config.sampler in ("always_on", "parentbased_always_on")
        # Each job's trace and its root as a parent, parsed once per instance; None: the
        # job has none (enqueued while tracing was off, or not sampled), asked once.
        self.known: OrderedDict[QueueId, Known | None] = OrderedDict()

    def now(self) -> int:
        return clock()

    def emit(self, name: str, kind: SpanKind, context: SpanContext, parent: SpanContext | None,
             started: int, ended: int, attributes: dict[str, Any], status: Status = _UNSET,
             links: Sequence[Link] = ()) -> None:
        """A finished span, to the exporter's batch."""
        self.processor.on_end(ReadableSpan(
            name, context, parent, self.resource, attributes, (), links, kind, None, status,
            started, ended, self.scope))

    def _child(self, name: str, kind: SpanKind, job: Known, started: int, ended: int,
               attributes: dict[str, Any], status: Status = _UNSET) -> None:
        parent = job.parent
        self.emit(name, kind, SpanContext(parent.trace_id, self.ids.generate_span_id(), False,
                                          parent.trace_flags, parent.trace_state),
                  parent, started, ended, {**job.common, **attributes}, status)

    def _know(self, queue_id: QueueId, job: Known | None) -> None:
        self.known[queue_id] = job
        if len(self.known) > KNOWN_TRACES:
            self.known.popitem(last=False)

    def _from_row(self, queue_id: QueueId, trace: JobTrace | None) -> Known | None:
        """A trace kept by another instance, if it is one and this sampler keeps its spans
        (the parent-based samplers do: the decision was made once, at the enqueue)."""
        parent = None if trace is None else get_current_span(
            _W3C.extract({"traceparent": trace.traceparent})).get_span_context()
        if trace is None or parent is None or not parent.is_valid:
            return None
        if self.sampler.should_sample(set_span_in_context(NonRecordingSpan(parent)),
                                      parent.trace_id, "aiqueue.claim").decision is not _KEEP:
            return None
        return known(queue_id, trace, parent)

    async def _traces(self, store: TraceStore, ids: Sequence[QueueId]) -> list[Known | None]:
        """Each job's trace (None: it has none): known here, else from its row (a job
        enqueued before tracing was on, or not sampled, has none)."""
        known_here = self.known
        found = [known_here.get(q, _ASK) for q in ids]
        missing = [q for q, job in zip(ids, found, strict=True) if job is _ASK]
        if missing:
            try:
                rows = await store.job_traces(missing)
            except Exception as exc:
                # Tracing never fails the work it traces: these spans are lost, not the job.
                logs.event("trace_lost", code=type(exc).__name__, count=len(missing))
            else:
                for queue_id in missing:
                    self._know(queue_id, self._from_row(queue_id, rows.get(queue_id)))
            found = [known_here.get(q) if job is _ASK else job
                     for q, job in zip(ids, found, strict=True)]
        return found

    async def enqueued(self, store: TraceStore, queue_ids: Sequence[QueueId], started: int,
                       *, kind: str, pool: str, caller: str | None = None) -> None:
        # One trace per job: the host's request is a link, not a parent.
        host = get_current_span(_W3C.extract({"traceparent": caller})).get_span_context() \
            if caller else None
        links = (Link(host),) if host is not None and host.is_valid else ()
        kept: dict[QueueId, JobTrace] = {}
        roots: dict[QueueId, Known] = {}
        ended = clock()
        for queue_id in queue_ids:
            trace_id, state = self.ids.generate_trace_id(), None
            if not self.always:
                decided = self.sampler.should_sample(None, trace_id, "aiqueue.enqueue",
                                                     SpanKind.PRODUCER, None, links)
                if decided.decision is not _KEEP:
                    continue
                state = decided.trace_state
            # Sampled, its attempts' spans are too, under every sampler offered (a
            # parent-based one follows the root; a ratio one decides by the trace id).
            root = SpanContext(trace_id, self.ids.generate_span_id(), False, _SAMPLED, state)
            trace = JobTrace(f"00-{trace_id:032x}-{root.span_id:016x}-01", kind, pool)
            kept[queue_id], roots[queue_id] = trace, known(queue_id, trace, root)
            self.emit("aiqueue.enqueue", SpanKind.PRODUCER, root, None, started, ended,
                      dict(roots[queue_id].common), links=links)
        if kept:
            try:
                await store.keep_traces(kept)
            except Exception as exc:
                logs.event("trace_lost", code=type(exc).__name__, count=len(kept))
                return
        for queue_id in queue_ids:  # an unsampled job has no trace: no need to ask
            self._know(queue_id, roots.get(queue_id))

    async def claimed(self, store: TraceStore, jobs: Sequence[Job], started: int) -> None:
        traces = await self._traces(store, [job.queue_id for job in jobs])
        ended = clock()
        for job, known_job in zip(jobs, traces, strict=True):
            if known_job is None:
                continue
            if known_job.trace.pool != job.pool:  # on its kind's fallback
                known_job = known(job.queue_id, replace(known_job.trace, pool=job.pool),
                                  known_job.parent)
                self._know(job.queue_id, known_job)
            self._child("aiqueue.claim", SpanKind.INTERNAL, known_job, started, ended,
                        {"aiqueue.attempt": job.attempt})

    async def dispatching(self, store: TraceStore, job: Job) -> DispatchSpan:
        (known_job,) = await self._traces(store, (job.queue_id,))
        return NO_SPAN if known_job is None else OtelSpan(self, known_job, job.attempt)

    async def applied(self, store: TraceStore, results: Sequence[Applied], started: int,
                      claimed: Sequence[Job] = ()) -> None:
        traces = await self._traces(store, [r.queue_id for r in results])
        ended = clock()
        for result, known_job in zip(results, traces, strict=True):
            if known_job is not None:
                self._child("aiqueue.result", SpanKind.CONSUMER, known_job, started, ended,
                            result_attributes(result),
                            _UNSET if result.error_code is None else _ERROR)
        if claimed:
            await self.claimed(store, claimed, started)

    async def flush(self) -> None:
        await self.processor.flush(FLUSH_SECONDS)

    async def close(self) -> None:
        await self.flush()
        self.processor.shutdown()
        if self.sender is not None:
            await self.sender.close()
