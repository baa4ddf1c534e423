"""One trace per job, end to end (docs/tracing.md): `aiqueue serve` exports OTLP/HTTP
protobuf to a small receiver on loopback, the reference function's span joins each job's
trace through the dispatch's traceparent, and nothing of a student's is in any span."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from aiqueue.paths import ROOT
from functions.ai_mark.server import create_app as function_app
from functions.ai_mark.settings import Settings as FunctionSettings
from functions.ai_mark.tracing_otel import OtelTracer as FunctionTracer
from tests.conftest import AUTH, SECRET
from tests.e2e.otlp import OtlpReceiver, ReceivedSpan
from tests.e2e.receiver import new_secret
from tests.e2e.servers import AppProcess, drain, free_port, run_asgi

pytestmark = pytest.mark.e2e

JOBS = 6
ANSWER = "Periwinkle-osmosis-answer"
QUESTION = "Explain-Mangrove-question"
FUNCTION_TOKEN = "fn-token-Quokka-0123456789abcdef"
SIGNING = new_secret()
ATTEMPT_SPANS = ("aiqueue.claim", "aiqueue.dispatch", "aiqueue.result")


@pytest.fixture
def stack(db_url: str) -> Iterator[tuple[AppProcess, OtlpReceiver]]:
    receiver = OtlpReceiver()
    fn_port = free_port()
    tracer = FunctionTracer(OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces"))
    fn = function_app(FunctionSettings(simulate_latency=0, function_token=FUNCTION_TOKEN,
                                       signing_secret=SIGNING), tracer=tracer)
    app = AppProcess({
        "DATABASE_URL": db_url, "MARKING_QUEUE_SECRET": SECRET,
        "AI_MARKING_FUNCTION_URL": f"http://127.0.0.1:{fn_port}/",
        "AI_MARKING_FUNCTION_TOKEN": FUNCTION_TOKEN, "AI_MARKING_SIGNING_SECRET": SIGNING,
        "QUEUE_MAX_IN_FLIGHT": "2",
        "QUEUE_MODEL_PRICES": '{"simulator": {"input": 1.0, "output": 2.0}}',
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "aiqueue-e2e",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test",
        # Batches leave every 100 ms, not every 5 s (the SDK's own variable).
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }, free_port())
    with receiver.running(), run_asgi(fn, fn_port):
        app.start()
        try:
            yield app, receiver
        finally:
            app.stop()
            tracer.close()


def by_job(spans: list[ReceivedSpan]) -> dict[str, list[ReceivedSpan]]:
    """The queue's spans by the job they name, and the function's (which name it too)."""
    jobs: dict[str, list[ReceivedSpan]] = defaultdict(list)
    for span in spans:
        if "aiqueue.queue_id" in span.attributes:
            jobs[span.attributes["aiqueue.queue_id"]].append(span)
    return jobs


def complete(spans: list[ReceivedSpan], queue_ids: list[str]) -> bool:
    jobs = by_job(spans)
    return all({"aiqueue.enqueue", *ATTEMPT_SPANS, "ai_mark.mark"}
               <= {s.name for s in jobs.get(q, [])} for q in queue_ids)


async def test_each_job_is_one_trace_with_the_functions_span_inside(
        stack: tuple[AppProcess, OtlpReceiver], conn: asyncpg.Connection) -> None:
    app, receiver = stack
    contents = [f"{ANSWER} number {k}" for k in range(JOBS)]
    ids = [r["id"] for r in await conn.fetch(
        "INSERT INTO submissions (id, assignment_id, content) "
        "SELECT gen_random_uuid(), 'hw-traces', c FROM unnest($1::text[]) c RETURNING id",
        contents)]
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        r = await client.post("/api/marking/enqueue", headers=AUTH, json={
            "assignment_id": "hw-traces", "submission_ids": [str(i) for i in ids],
            "payload": {"rubric": f"{QUESTION}: names the membrane", "max_score": 4}})
        assert r.status_code == 202, r.text
        queue_ids: list[str] = r.json()["queue_ids"]
    await drain(conn)
    deadline = time.monotonic() + 20
    while not complete(receiver.snapshot(), queue_ids) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    spans = receiver.snapshot()
    assert complete(spans, queue_ids), sorted({s.name for s in spans})
    assert receiver.content_types == {"application/x-protobuf"}

    jobs = by_job(spans)
    traces = set()
    for queue_id in queue_ids:
        mine = jobs[queue_id]
        (trace_id,) = {s.trace_id for s in mine}  # one trace per job
        traces.add(trace_id)
        (root,) = [s for s in mine if s.name == "aiqueue.enqueue"]
        assert root.parent_id == "" and root.service == "aiqueue-e2e"
        for name in ATTEMPT_SPANS:
            assert all(s.parent_id == root.span_id for s in mine if s.name == name), name
        dispatches = {s.span_id for s in mine if s.name == "aiqueue.dispatch"}
        (marked,) = [s for s in mine if s.name == "ai_mark.mark"]
        assert marked.service == "ai-mark" and marked.parent_id in dispatches
        (result,) = [s for s in mine if s.name == "aiqueue.result"]
        expect_result(result.attributes, queue_id)
    assert len(traces) == JOBS
    # Every span of the run is in one of the jobs' traces.
    assert {s.trace_id for s in spans} == traces

    secrets = [SECRET, FUNCTION_TOKEN, SIGNING, SIGNING.removeprefix("whsec_")]
    feedback = [r["feedback"] for r in await conn.fetch(
        "SELECT result->>'feedback' AS feedback FROM ai_marking_results")]
    assert len(feedback) == JOBS and all(feedback)
    exported = "\n".join(receiver.texts)
    for needle in [ANSWER, QUESTION, *contents, *feedback, *secrets, *map(str, ids)]:
        assert needle not in exported


def expect_result(attrs: dict[str, Any], queue_id: str) -> None:
    """The result's span: the GenAI conventions, the job's ids, its outcome and cost."""
    assert attrs["gen_ai.request.model"] == "simulator"
    assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
    assert attrs["aiqueue.queue_id"] == queue_id and attrs["aiqueue.attempt"] == 1
    assert (attrs["aiqueue.kind"], attrs["aiqueue.pool"]) == ("mark", "default")
    assert attrs["aiqueue.outcome"] == "completed" and attrs["aiqueue.applied"] is True
    expected = (attrs["gen_ai.usage.input_tokens"] * 1.0
                + attrs["gen_ai.usage.output_tokens"] * 2.0) / 1e6
    assert attrs["aiqueue.cost_usd"] == pytest.approx(expected)


async def test_off_nothing_of_opentelemetry_is_imported_or_kept(db_url: str) -> None:
    # A process of its own: this one has imported the SDK for the test above.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "tests.e2e.traces_off_run", db_url],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["statuses"] == ["completed"] * 3
    assert seen["traces_kept"] == 0 and seen["otel_modules"] == []
