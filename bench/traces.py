"""Tracing's cost (docs/tracing.md): the loop with an OTLP exporter on against the same run
with it off, interleaved (off, on, on, off, off, on, ...) so both see the same machine
and neither side always runs second.

The exporter sends to bench/otlpsink.py, a process of its own; its span count says the
spans really left (about four per job: enqueue, claim, dispatch, result).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aiqueue.models import Job, QueueId, SubmissionId
from aiqueue.settings.tracing import Tracing
from aiqueue.tracing import Applied, JobTrace, otlp
from aiqueue.tracing.otel import OtelTracer
from bench import loop
from bench.common import Table, free_port, middle, spawn, wait_http

USAGE = {"model": "bench-model", "prompt_tokens": 900, "completion_tokens": 120,
         "cache_read_tokens": 800, "cache_write_tokens": 0}


class Rows:
    """ai_marking_traces in memory: the tracer's calls alone are timed."""

    def __init__(self) -> None:
        self.traces: dict[QueueId, JobTrace] = {}

    async def keep_traces(self, traces: Mapping[QueueId, JobTrace]) -> None:
        self.traces.update(traces)

    async def job_traces(self, queue_ids: Sequence[QueueId]) -> dict[QueueId, JobTrace]:
        return {q: self.traces[q] for q in queue_ids if q in self.traces}


def _jobs(jobs: int) -> list[Job]:
    return [Job(QueueId(uuid.uuid4()), SubmissionId(uuid.uuid4()), "bench", 1, 1,
                json.dumps(loop.PAYLOAD_2KB), "answer") for _ in range(jobs)]


async def _spans(tracer: OtelTracer, batch: list[Job]) -> None:
    """Each job's spans: the enqueue's, a claim's, a dispatch's and a result's."""
    rows = Rows()
    for at in range(0, len(batch), 100):  # enqueued 100 at a time, as a class's Mark All
        part = batch[at:at + 100]
        await tracer.enqueued(rows, [j.queue_id for j in part], tracer.now(), kind="mark",
                              pool="default")
        for job in part:
            await tracer.claimed(rows, [job], tracer.now())
            (await tracer.dispatching(rows, job)).end("accepted")
            await tracer.applied(rows, [Applied(job.queue_id, 1, "completed", True, USAGE,
                                                cost_usd=0.001)], tracer.now())


async def tracer_cpu_us(endpoint: str, jobs: int) -> tuple[float, float]:
    """CPU per job of a job's spans with a real OTLP/HTTP export, then a flush: in all, and
    before the flush (made, queued, and the batches sent meanwhile)."""
    # Every span kept for export, none dropped: the loop below makes them faster than any
    # app; the batches are the app's own (tracing/export.py).
    config = Tracing(f"{endpoint}/v1/traces", service_name="aiqueue-bench")
    tracer = OtelTracer(replace(config, queued=max(jobs * 5, config.queued)))
    batch = _jobs(jobs)
    started, on_thread = time.process_time(), time.thread_time()
    await _spans(tracer, batch)
    made = time.thread_time() - on_thread
    await tracer.flush()
    used = time.process_time() - started
    await tracer.close()
    return used * 1e6 / jobs, made * 1e6 / jobs


async def encode_us(jobs: int) -> tuple[float, float]:
    """CPU per job of writing its four spans' protobuf: the SDK's encoder, then ours."""
    exporter = InMemorySpanExporter()
    tracer = OtelTracer(Tracing("http://unused"), exporter)
    await _spans(tracer, _jobs(jobs))
    await tracer.flush()
    spans = list(exporter.get_finished_spans())
    size = tracer.processor.batch
    batches = [spans[at:at + size] for at in range(0, len(spans), size)]
    timed = []
    for encode in (lambda b: encode_spans(b).SerializeToString(), otlp.encode):
        started = time.process_time()
        for part in batches:
            encode(part)
        timed.append((time.process_time() - started) * 1e6 / jobs)
    await tracer.close()
    return timed[0], timed[1]


async def traces_rows(rows: Table, repeats: int, jobs: int,
                      caps: Sequence[int] = (1, 8)) -> None:
    port = free_port()
    sink = spawn(["-m", "bench.otlpsink", str(port)])
    try:
        wait_http(f"http://127.0.0.1:{port}/stats")
        on_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
                  "OTEL_SERVICE_NAME": "aiqueue-bench"}
        timed = [await tracer_cpu_us(f"http://127.0.0.1:{port}", jobs)
                 for _ in range(repeats)]
        own = [t[0] for t in timed]
        rows.append(("tracing's own CPU per job (4 spans, encoded and exported)", "us", own,
                     None, "-"))
        rows.append(("  of which the loop's thread (making and queueing the spans)", "us",
                     [t[1] for t in timed], None, "-"))
        encoded = [await encode_us(jobs) for _ in range(repeats)]
        rows.append(("  writing the protobuf, the SDK's encoder", "us", [e[0] for e in encoded],
                     None, "reference"))
        rows.append(("  writing the protobuf, tracing/otlp.py", "us", [e[1] for e in encoded],
                     middle(e[0] for e in encoded), "-"))
        for cap in caps:
            off: list[loop.LoopRun] = []
            on: list[loop.LoopRun] = []
            spans: list[float] = []
            for i in range(repeats):
                # Each pair in the other order than the one before: a run after another
                # pays for its vacuum, checkpoint and shutdown, whichever side it is.
                for traced in (False, True) if i % 2 == 0 else (True, False):
                    if not traced:
                        off.append(await loop.run_loop(cap, jobs, f"bench_traces_off{cap}_{i}"))
                        continue
                    before = httpx.get(f"http://127.0.0.1:{port}/stats").json()["spans"]
                    on.append(await loop.run_loop(cap, jobs, f"bench_traces_on{cap}_{i}",
                                                  on_env))
                    # The app's last batch leaves when it shuts down (run_loop waits it out).
                    after = httpx.get(f"http://127.0.0.1:{port}/stats").json()["spans"]
                    spans.append((after - before) / jobs)
            base = middle(r.jobs_per_s for r in off)
            off_cpu = middle(r.cpu_ms_per_job for r in off)
            rows.append((f"loop, in-flight {cap}, traces off", "jobs/s",
                         [r.jobs_per_s for r in off], None, "reference"))
            rows.append((f"loop, in-flight {cap}, traces exported (OTLP/HTTP)", "jobs/s",
                         [r.jobs_per_s for r in on], base, ">= 0.97x off"))
            rows.append((f"  each pair: traced / off, in-flight {cap}", "ratio",
                         [b.jobs_per_s / a.jobs_per_s for a, b in zip(off, on, strict=True)],
                         None, ">= 0.97"))
            rows.append((f"  app CPU per job, traced, in-flight {cap}", "ms",
                         [r.cpu_ms_per_job for r in on],
                         off_cpu, "-"))
            rows.append((f"  spans received per job, in-flight {cap}", "spans", spans, None,
                         "4"))
            # Every process of the machine (app, database, function, sink): on a machine
            # that runs nothing else, what the loop's throughput is bounded by.
            rows.append((f"  machine CPU per job, traced, in-flight {cap}", "ms",
                         [r.machine_cpu_ms_per_job for r in on],
                         middle(r.machine_cpu_ms_per_job for r in off), "-"))
            rows.append((f"  each pair: machine CPU off / traced, in-flight {cap}", "ratio",
                         [a.machine_cpu_ms_per_job / b.machine_cpu_ms_per_job
                          for a, b in zip(off, on, strict=True)], None, "-"))
            rows.append((f"  tracing's own CPU / the loop's CPU per job off, in-flight {cap}",
                         "%", [u / 10 / off_cpu for u in own], None, "-"))
    finally:
        sink.terminate()
        sink.wait(10)
