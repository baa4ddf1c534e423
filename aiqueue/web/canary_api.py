"""Drift canaries' routes (docs/canaries.md): list runs, start one, accept a drift."""

from __future__ import annotations

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from aiqueue import wire
from aiqueue.queue import canary, loop, review
from aiqueue.web import gate
from aiqueue.web.http import respond
from aiqueue.web.state import runtime
from aiqueue.wire.canary import CanaryRunAnswer, CanaryRuns

# The most runs one list answers.
MAX_RUNS = 100


@gate.bearer()
async def list_runs(request: Request) -> Response:
    rt = await runtime(request)
    kind = request.query_params.get("kind") or None
    runs = await rt.store.canary_runs(wire.parse_kind(kind) if kind else None, MAX_RUNS)
    return respond(CanaryRuns(items=[CanaryRunAnswer.of(r) for r in runs]))


@gate.bearer()
@gate.no_body
async def run(request: Request) -> Response:
    rt = await runtime(request)
    kind = wire.parse_kind(request.path_params["kind"])
    started = await canary.run_now(rt, kind)
    then = BackgroundTask(canary.send_now, rt, kind) if started.state == "running" else None
    return respond(CanaryRunAnswer.of(started), 202, background=then)


@gate.bearer()
@gate.no_body
async def accept(request: Request) -> Response:
    rt = await runtime(request)
    kind = wire.parse_kind(request.path_params["kind"])
    actor = review.parse_actor(request.headers.get("x-actor"))
    accepted = await canary.accept(rt, kind, actor or "api")
    return respond(CanaryRunAnswer.of(accepted), background=BackgroundTask(loop.after_action,
                                                                            rt))


ROUTES = [
    Route("/api/marking/canary", list_runs, methods=["GET"]),
    Route("/api/marking/canary/{kind}/run", run, methods=["POST"]),
    Route("/api/marking/canary/{kind}/accept", accept, methods=["POST"]),
]
