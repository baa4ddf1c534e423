"""The agreement and calibration routes (docs/agreement.md)."""

from __future__ import annotations

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from aiqueue import wire
from aiqueue.queue import calibration, loop, review
from aiqueue.reads import agreement
from aiqueue.web import gate
from aiqueue.web.http import respond
from aiqueue.web.state import runtime
from aiqueue.wire.rules import parse_rfc3339, short_text


@gate.bearer()
async def agreement_report(request: Request) -> Response:
    rt = await runtime(request)
    q = request.query_params
    assignment = q.get("assignment_id") or None
    kind = q.get("kind") or None
    model = q.get("model") or None
    since = q.get("since") or None
    answer = await agreement.report(
        rt, assignment_id=wire.parse_assignment_id(assignment) if assignment else None,
        group=wire.parse_group(q.get("group") or None),
        kind=wire.parse_kind(kind) if kind else None,
        model=short_text(model, "model") if model else None,
        since=parse_rfc3339(since, "since") if since else None)
    return respond(answer)


@gate.bearer()
@gate.no_body
async def release(request: Request) -> Response:
    rt = await runtime(request)
    run_id = wire.parse_uuid(request.path_params["run_id"], "run")
    actor = review.parse_actor(request.headers.get("x-actor"))
    done = await calibration.release(rt, run_id, actor or "api")
    return respond(done, background=BackgroundTask(loop.after_action, rt))


ROUTES = [
    Route("/api/marking/agreement", agreement_report, methods=["GET"]),
    Route("/api/marking/runs/{run_id}/release", release, methods=["POST"]),
]
