"""One trace per job (docs/tracing.md): the calls the queue's rules make, no-ops when off.

The runtime holds one `Tracer`: this module's, whose every call returns at
once, unless `OTEL_EXPORTER_OTLP_ENDPOINT` is set (settings/tracing.py); then
`start` imports the SDK (tracing/otel.py) and returns its tracer.  Nothing of
OpenTelemetry is imported while tracing is off.

A job's trace is made at the enqueue: its root span's W3C `traceparent`, with
the job's kind and pool, is kept in ai_marking_traces (one row per job,
written only then), so a claim, a dispatch or a result in another instance
or invocation continues it.  Each call takes plain values, never a student's
content: what a span may carry is listed in tracing/otel.py.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiqueue.models import Job, QueueId
from aiqueue.settings.tracing import Tracing


@dataclass(frozen=True)
class JobTrace:
    """A job's trace as kept with its row: its root span's traceparent, kind and pool."""

    traceparent: str
    kind: str
    pool: str


@dataclass(frozen=True)
class Applied:
    """One result as its span tells it: ids, counts and codes only."""

    queue_id: QueueId
    attempt: int
    # completed, failed, rate_limited, overloaded
    outcome: str
    applied: bool
    # The cost-tracking fields the results keep (results._usage): model and counts.
    usage: Mapping[str, Any] | None = None
    cost_usd: float | None = None
    error_code: str | None = None


class TraceStore(Protocol):
    """Where the jobs' traces are kept (sql/traces.sql)."""

    async def keep_traces(self, traces: Mapping[QueueId, JobTrace]) -> None: ...

    async def job_traces(self, queue_ids: Sequence[QueueId]) -> dict[QueueId, JobTrace]: ...


class DispatchSpan:
    """A dispatch's span: the headers that carry it to the function, then its end."""

    headers: Mapping[str, str] = {}

    def end(self, outcome: str, code: str | None = None,
            http_status: int | None = None) -> None:
        """End the span with the dispatch's outcome (accepted, busy, failed)."""


NO_SPAN = DispatchSpan()


class Tracer:
    """Tracing off: every call returns at once (tracing/otel.py's subclass records)."""

    on = False

    def now(self) -> int:
        """A span's start, taken before the work it times (0 while off)."""
        return 0

    async def enqueued(self, store: TraceStore, queue_ids: Sequence[QueueId], started: int,
                       *, kind: str, pool: str, caller: str | None = None) -> None:
        """Each new job's trace, rooted at its enqueue's span, kept with its row; linked
        to the `caller`'s trace (the enqueue request's traceparent) when it sent one."""

    async def claimed(self, store: TraceStore, jobs: Sequence[Job], started: int) -> None:
        """A claim's span in each claimed job's trace."""

    async def dispatching(self, store: TraceStore, job: Job) -> DispatchSpan:
        """A dispatch's span, started (end it with its outcome)."""
        return NO_SPAN

    async def applied(self, store: TraceStore, results: Sequence[Applied], started: int,
                      claimed: Sequence[Job] = ()) -> None:
        """Each result's span (and the claims its statement made, `claimed`)."""

    async def flush(self) -> None:
        """Export what is pending now (on Vercel, before the invocation ends)."""

    async def close(self) -> None:
        """Flush and stop the exporter."""


def prepare(config: Tracing | None) -> None:
    """When tracing is on, import the SDK's side now, as the app is made: about 0.1 s of
    CPU that would otherwise fall on the instance's first request (docs/tracing.md)."""
    if config is not None:
        import aiqueue.tracing.otel  # noqa: F401


def start(config: Tracing | None) -> Tracer:
    """The instance's tracer: the SDK's when configured, else the no-op one."""
    if config is None:
        return Tracer()
    from aiqueue.tracing.otel import OtelTracer  # only now: off, nothing is imported

    return OtelTracer(config)


def clock() -> int:
    """Nanoseconds since the epoch, as spans take them."""
    return time.time_ns()
