"""The teacher page's Answer button (docs/review-holds.md): the teacher's answer to a
marker's question, from the page's form.  Accept and Adjust use the page's review form."""

from __future__ import annotations

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from aiqueue import wire
from aiqueue.queue import clarify, loop
from aiqueue.web import gate
from aiqueue.web.auth import Session
from aiqueue.web.http import respond
from aiqueue.web.state import runtime
from aiqueue.wire.holds import ClarifyRequest


@gate.form(gate.unauthorized)
async def answer(request: Request, session: Session, form: dict[str, str]) -> Response:
    rt = await runtime(request)
    assignment_id = wire.parse_assignment_id(request.path_params["assignment_id"])
    body = wire.parse(ClarifyRequest, {"assignment_id": assignment_id,
                                       "question_id": form.get("question_id"),
                                       "answer": form.get("answer")})
    # The operator's login is the actor: the page is behind the /ai-queue sign-in.
    done = await clarify.clarify(rt, body, session.user)
    return respond(done, status_code=202,
                   background=BackgroundTask(loop.after_enqueue, rt, done.remarked + done.moved))


ROUTES = [
    Route("/results/assignments/{assignment_id}/clarify", answer, methods=["POST"]),
]
