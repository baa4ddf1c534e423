"""Live events (SSE) and the status, progress and cancel endpoints under /api/marking."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from aiqueue import wire
from aiqueue.queue import actions, loop, progress
from aiqueue.reads import live
from aiqueue.web import gate
from aiqueue.web.http import respond
from aiqueue.web.state import app_state, runtime


def configure(app: Starlette, config: live.LiveConfig) -> None:
    """Use `config` for this app's streams (dev and tests); before the first stream."""
    app.state.aiqueue.live_config = config


async def close_streams(app: Starlette) -> None:
    """End every open stream of this app (before a graceful shutdown)."""
    await app.state.aiqueue.close_streams()


@gate.bearer("events")
async def events(request: Request) -> Response:
    assignment_id = wire.parse_assignment_id(request.query_params.get("assignment_id"))
    rt = await runtime(request)
    # The header wins: EventSource sends it on reconnect, the query is the page's start.
    resume = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    body = await live.open_stream(rt, app_state(request).event_hub(), assignment_id, resume)
    return StreamingResponse(
        body,
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


@gate.bearer()
async def submission_status(request: Request) -> Response:
    rt = await runtime(request)
    submission_id = wire.parse_uuid(request.path_params["submission_id"], "submission")
    # Someone is waiting on this queue: if its chain broke, restart it.
    status = await progress.submission_status(rt, submission_id)
    return respond(status, background=BackgroundTask(loop.after_read, rt))


@gate.bearer()
async def assignment_progress(request: Request) -> Response:
    rt = await runtime(request)
    assignment_id = wire.parse_assignment_id(request.path_params["assignment_id"])
    run = await progress.assignment_progress(rt, assignment_id)
    return respond(run, background=BackgroundTask(loop.after_read, rt))


@gate.bearer()
@gate.no_body
async def cancel_assignment(request: Request) -> Response:
    rt = await runtime(request)
    assignment_id = wire.parse_assignment_id(request.path_params["assignment_id"])
    return respond(await actions.cancel_assignment(rt, assignment_id, actor="api"),
                   background=BackgroundTask(loop.after_cancel, rt))


ROUTES = [
    Route("/api/marking/events", events, methods=["GET"]),
    Route("/api/marking/submissions/{submission_id}/status", submission_status, methods=["GET"]),
    Route("/api/marking/assignments/{assignment_id}/progress", assignment_progress,
          methods=["GET"]),
    Route("/api/marking/assignments/{assignment_id}/cancel", cancel_assignment,
          methods=["POST"]),
]
