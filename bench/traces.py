"""Tracing's cost (docs/tracing.md): the loop with an OTLP exporter on against the same run
with it off, interleaved (off, on, off, on, ...) so both see the same machine.

The exporter sends to bench/otlpsink.py, a process of its own; its span count says the
spans really left (about four per job: enqueue, claim, dispatch, result).
"""

from __future__ import annotations

import httpx

from bench import loop
from bench.common import Table, free_port, spawn, wait_http


async def traces_rows(rows: Table, repeats: int, jobs: int) -> None:
    port = free_port()
    sink = spawn(["-m", "bench.otlpsink", str(port)])
    try:
        wait_http(f"http://127.0.0.1:{port}/stats")
        on_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
                  "OTEL_SERVICE_NAME": "aiqueue-bench"}
        for cap in (1, 8):
            off: list[loop.LoopRun] = []
            on: list[loop.LoopRun] = []
            spans: list[float] = []
            for i in range(repeats):
                off.append(await loop.run_loop(cap, jobs, f"bench_traces_off{cap}_{i}"))
                before = httpx.get(f"http://127.0.0.1:{port}/stats").json()["spans"]
                on.append(await loop.run_loop(cap, jobs, f"bench_traces_on{cap}_{i}", on_env))
                # The app's last batch leaves when it shuts down (run_loop waits it out).
                after = httpx.get(f"http://127.0.0.1:{port}/stats").json()["spans"]
                spans.append((after - before) / jobs)
            base = sorted(r.jobs_per_s for r in off)[len(off) // 2]
            rows.append((f"loop, in-flight {cap}, traces off", "jobs/s",
                         [r.jobs_per_s for r in off], None, "reference"))
            rows.append((f"loop, in-flight {cap}, traces exported (OTLP/HTTP)", "jobs/s",
                         [r.jobs_per_s for r in on], base, ">= 0.97x off"))
            rows.append((f"  each pair: traced / off, in-flight {cap}", "ratio",
                         [b.jobs_per_s / a.jobs_per_s for a, b in zip(off, on, strict=True)],
                         None, ">= 0.97"))
            rows.append((f"  app CPU per job, traced, in-flight {cap}", "ms",
                         [r.cpu_ms_per_job for r in on],
                         sorted(r.cpu_ms_per_job for r in off)[len(off) // 2], "-"))
            rows.append((f"  spans received per job, in-flight {cap}", "spans", spans, None,
                         "4"))
    finally:
        sink.terminate()
        sink.wait(10)
