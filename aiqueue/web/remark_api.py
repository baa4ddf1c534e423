"""A rubric changes: POST /api/marking/remark (docs/remark.md)."""

from __future__ import annotations

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from aiqueue import wire
from aiqueue.queue import loop, review
from aiqueue.queue.remark import Remark, accepted, estimate, remark
from aiqueue.web import gate
from aiqueue.web.http import read_json, respond
from aiqueue.web.state import runtime
from aiqueue.wire.remark import DEFAULT_DEBOUNCE_SECONDS, RemarkRequest


@gate.bearer()
async def remark_route(request: Request) -> Response:
    rt = await runtime(request)
    body = wire.parse(RemarkRequest, await read_json(request))
    actor = review.parse_actor(request.headers.get("x-actor")) or "api"
    asked = Remark(body.assignment_id, body.payload, bool(body.include_reviewed),
                   DEFAULT_DEBOUNCE_SECONDS if body.debounce_seconds is None
                   else body.debounce_seconds)
    if body.dry_run:
        return respond(await estimate(rt, asked))
    done = await remark(rt, asked, actor=actor)
    return respond(accepted(done), 202,
                   background=BackgroundTask(loop.after_enqueue, rt, len(done.queue_ids)))


ROUTES = [Route("/api/marking/remark", remark_route, methods=["POST"])]
