"""One trace per job across instances (docs/tracing.md), against a real PostgreSQL: the
enqueue's instance keeps the trace with the row, another instance continues it."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import httpx
import respx
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aiqueue.settings.tracing import Tracing
from aiqueue.tracing.otel import OtelTracer
from aiqueue.web.app import create_app
from tests.conftest import AUTH, FN, SELF_CHAIN, add_submissions, app_client, make_settings

USAGE = {"model": "m-1", "prompt_tokens": 120, "completion_tokens": 30,
         "cache_read_tokens": 100, "cache_write_tokens": 0}


def traced(app: Any, rt: Any) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    rt.tracer = OtelTracer(Tracing("http://unused"), exporter)
    return exporter


async def finished(rt: Any, exporter: InMemorySpanExporter) -> list[Any]:
    await rt.tracer.flush()
    return list(exporter.get_finished_spans())


async def test_another_instance_continues_the_jobs_trace(
        db_url: str, conn: asyncpg.Connection) -> None:
    ids = await add_submissions(conn, 1, "hw-tr")
    one, other = create_app(make_settings(db_url)), create_app(make_settings(db_url))
    dispatched: list[httpx.Request] = []

    def function(request: httpx.Request) -> httpx.Response:
        dispatched.append(request)
        return httpx.Response(202)

    with respx.mock(assert_all_called=False) as mock:
        mock.post(SELF_CHAIN).mock(return_value=httpx.Response(200, json={}))
        mock.post(FN).mock(side_effect=function)
        async with app_client(one) as a, app_client(other) as b:
            rt_a, rt_b = await one.state.aiqueue.get(), await other.state.aiqueue.get()
            spans_a, spans_b = traced(one, rt_a), traced(other, rt_b)
            r = await a.post("/api/marking/enqueue", headers=AUTH, json={
                "assignment_id": "hw-tr", "submission_ids": [str(i) for i in ids],
                "payload": {"rubric": "r", "max_score": 5}})
            assert r.status_code == 202 and len(dispatched) == 1
            body = json.loads(dispatched[0].content)
            # The result comes back to the other instance, which never saw the job.
            r = await b.post("/webhooks/ai-mark", json=[{
                "queue_id": body["queue_id"], "status": "completed", "token":
                body["callback_token"], "result": {"score": 4, "max_score": 5},
                "usage": USAGE}])
            assert r.status_code == 200 and r.json()["accepted"] == 1
            here, there = await finished(rt_a, spans_a), await finished(rt_b, spans_b)
    assert [s.name for s in here] == ["aiqueue.enqueue", "aiqueue.claim", "aiqueue.dispatch"]
    root, _claim, dispatch = here
    (result,) = there
    assert result.name == "aiqueue.result"
    assert result.context.trace_id == root.context.trace_id
    assert result.parent.span_id == root.context.span_id
    assert result.attributes["gen_ai.usage.cache_read.input_tokens"] == 100
    # The function is told which span its own spans belong under.
    header = dispatched[0].headers["traceparent"]
    version, trace_id, parent, flags = header.split("-")
    assert (version, trace_id) == ("00", f"{root.context.trace_id:032x}")
    assert parent == f"{dispatch.context.span_id:016x}" and int(flags, 16) & 1  # sampled
    kept = await conn.fetchrow("SELECT traceparent, kind, pool FROM ai_marking_traces "
                               "WHERE queue_id = $1", root.attributes["aiqueue.queue_id"])
    assert kept is not None and (kept["kind"], kept["pool"]) == ("mark", "default")
    assert kept["traceparent"].split("-")[1] == f"{root.context.trace_id:032x}"


async def test_off_no_trace_is_kept_and_no_header_sent(db_url: str, conn: asyncpg.Connection,
                                                       function: respx.Route) -> None:
    ids = await add_submissions(conn, 2, "hw-off")
    app = create_app(make_settings(db_url))
    async with app_client(app) as client:
        r = await client.post("/api/marking/enqueue", headers=AUTH, json={
            "assignment_id": "hw-off", "submission_ids": [str(i) for i in ids],
            "payload": {"rubric": "r", "max_score": 5}})
        assert r.status_code == 202
    assert function.call_count >= 1
    assert all("traceparent" not in call.request.headers for call in function.calls)
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_traces") == 0


async def test_a_jobs_trace_goes_with_its_row(db_url: str, conn: asyncpg.Connection) -> None:
    ids = await add_submissions(conn, 1, "hw-gone")
    app = create_app(make_settings(db_url))
    with respx.mock(assert_all_called=False) as mock:
        mock.post(SELF_CHAIN).mock(return_value=httpx.Response(200, json={}))
        mock.post(FN).mock(return_value=httpx.Response(202))
        async with app_client(app) as client:
            traced(app, await app.state.aiqueue.get())
            r = await client.post("/api/marking/enqueue", headers=AUTH, json={
                "assignment_id": "hw-gone", "submission_ids": [str(ids[0])],
                "payload": {"rubric": "r", "max_score": 5}})
            assert r.status_code == 202
            assert await conn.fetchval("SELECT count(*) FROM ai_marking_traces") == 1
            r = await client.delete(f"/api/marking/submissions/{ids[0]}", headers=AUTH)
            assert r.status_code == 200, r.text
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_traces") == 0
