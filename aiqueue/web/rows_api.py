"""One row from the outside: GET a row, POST its cancel or an operator's fail.

Thin handlers over aiqueue/queue/one_row.py; the bearer gate runs first.
"""

from __future__ import annotations

from uuid import UUID

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from aiqueue import wire
from aiqueue.errors import Invalid
from aiqueue.queue import loop, one_row
from aiqueue.web import gate
from aiqueue.web.http import read_json, respond
from aiqueue.web.state import runtime
from aiqueue.wire.requests import FailRequest

# The actor an API action is recorded with (the page records its operator).
ACTOR = "api"


def _queue_id(request: Request) -> UUID:
    """The path's id: one that is not a UUID is malformed (422), an unknown one 404 later."""
    try:
        return UUID(request.path_params["queue_id"])
    except ValueError:
        raise Invalid("queue_id must be a UUID") from None


@gate.bearer()
async def row_detail(request: Request) -> Response:
    queue_id = _queue_id(request)
    rt = await runtime(request)
    return respond(await one_row.detail(rt, queue_id))


@gate.bearer()
@gate.no_body
async def row_cancel(request: Request) -> Response:
    queue_id = _queue_id(request)
    rt = await runtime(request)
    answer = await one_row.cancel(rt, queue_id, ACTOR)
    # A processing row's slot is free now: the next row may go.
    return respond(answer, background=BackgroundTask(loop.after_action, rt))


@gate.bearer()
async def row_fail(request: Request) -> Response:
    queue_id = _queue_id(request)
    body = wire.parse(FailRequest, await read_json(request, 16 * 1024))
    rt = await runtime(request)
    return respond(await one_row.fail(rt, queue_id, body.note, ACTOR))


ROUTES = [
    Route("/api/marking/rows/{queue_id}", row_detail, methods=["GET"]),
    Route("/api/marking/rows/{queue_id}/cancel", row_cancel, methods=["POST"]),
    Route("/api/marking/rows/{queue_id}/fail", row_fail, methods=["POST"]),
]
