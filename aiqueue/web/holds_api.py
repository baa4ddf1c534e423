"""Review holds from the outside (docs/review-holds.md): the teacher's list and an answer.

Thin handlers over reads/holds.py and queue/clarify.py; the bearer gate runs first.
"""

from __future__ import annotations

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from aiqueue import wire
from aiqueue.queue import clarify, loop, review
from aiqueue.reads import holds
from aiqueue.web import gate
from aiqueue.web.http import read_json, respond
from aiqueue.web.state import runtime
from aiqueue.wire.holds import ClarifyRequest


@gate.bearer()
async def review_needed(request: Request) -> Response:
    assignment_id = wire.parse_assignment_id(request.query_params.get("assignment_id"))
    rt = await runtime(request)
    return respond(holds.review_needed(assignment_id, await holds.held(rt, assignment_id)))


@gate.bearer()
async def clarify_question(request: Request) -> Response:
    body = wire.parse(ClarifyRequest, await read_json(request, 16 * 1024))
    actor = review.parse_actor(request.headers.get("x-actor")) or "api"
    rt = await runtime(request)
    answer = await clarify.clarify(rt, body, actor)
    due = answer.remarked + answer.moved
    return respond(answer, status_code=202,
                   background=BackgroundTask(loop.after_enqueue, rt, due))


ROUTES = [
    Route("/api/marking/review_needed", review_needed, methods=["GET"]),
    Route("/api/marking/clarify", clarify_question, methods=["POST"]),
]
