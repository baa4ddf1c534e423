"""A school's data over HTTP: erase, export, replay; and the page's twins.

Thin handlers over aiqueue/records/: each parses, calls one rule and answers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from aiqueue import wire
from aiqueue.models.records import ReplayFilter
from aiqueue.queue import loop
from aiqueue.records import erasure, export, replay
from aiqueue.web import gate
from aiqueue.web.auth import Session
from aiqueue.web.http import query_int, read_json, respond
from aiqueue.web.state import runtime
from aiqueue.wire import answers

# The /ai-queue page's export button: the last this-many days, as CSV.
PAGE_EXPORT_DAYS = 30


@gate.bearer()
@gate.no_body
async def erase_submission(request: Request) -> Response:
    """DELETE /api/marking/submissions/{id}: 200 {"erased": {table: rows}}, zeros if unknown."""
    submission_id = wire.parse_uuid(request.path_params["submission_id"], "submission")
    rt = await runtime(request)
    counts = await erasure.erase_submissions(rt, [submission_id], "api")
    # A row in flight was deleted: its slot is free for the next row.
    kick = BackgroundTask(loop.after_action, rt) if counts["ai_marking_queue"] else None
    return respond(answers.Erased(erased=counts), background=kick)


def _streamed(wanted: export.ExportRequest, body: AsyncIterator[bytes]) -> StreamingResponse:
    disposition = f'attachment; filename="{wanted.filename()}"'
    return StreamingResponse(body, media_type=export.MEDIA_TYPES[wanted.format],
                             headers={"content-disposition": disposition,
                                      "cache-control": "no-store"})


@gate.bearer()
async def export_records(request: Request) -> Response:
    """GET /api/marking/export?from=&to=&format=csv|jsonl&include=feedback, streamed."""
    wanted = export.ExportRequest.parse(request.query_params, datetime.now(UTC))
    rt = await runtime(request)
    return _streamed(wanted, export.stream(rt, wanted))


@gate.bearer()
async def replay_failed(request: Request) -> Response:
    """POST /api/marking/replay: {"matched", "replayed"}; Idempotency-Key as the enqueue's."""
    key = wire.parse_idempotency_key(request.headers.get("idempotency-key"))
    body = replay.ReplayRequest.parse(await read_json(request, 64 * 1024))
    rt = await runtime(request)
    answer, repeated = await replay.replay(rt, body, actor="api", key=key)
    if repeated:
        return respond(answer, headers={"Idempotent-Replayed": "true"})
    kick = BackgroundTask(loop.after_action, rt) if answer.replayed else None
    return respond(answer, background=kick)


@gate.session()
async def page_export(request: Request, session: Session) -> Response:
    """The page's button: the last `days` (default 30) as CSV, content-free."""
    days = query_int(request, "days", PAGE_EXPORT_DAYS, 1, 3660)
    now = datetime.now(UTC)
    wanted = export.ExportRequest(now - timedelta(days=days), now, "csv")
    rt = await runtime(request)
    return _streamed(wanted, export.stream(rt, wanted))


@gate.session(gate.unauthorized)
async def page_replay_count(request: Request, session: Session) -> Response:
    """What "Retry all failed" would do, for the page's confirmation (a dry run)."""
    raw = (request.query_params.get("assignment_id") or "").strip()
    where = ReplayFilter(assignment_id=wire.parse_assignment_id(raw) if raw else None)
    rt = await runtime(request)
    answer, _ = await replay.replay(rt, replay.ReplayRequest(where, True, ""),
                                    actor=session.user)
    return JSONResponse(wire.dump(answer))


ROUTES = [
    Route("/api/marking/submissions/{submission_id}", erase_submission, methods=["DELETE"]),
    Route("/api/marking/export", export_records, methods=["GET"]),
    Route("/api/marking/replay", replay_failed, methods=["POST"]),
    Route("/ai-queue/export.csv", page_export, methods=["GET"]),
    Route("/ai-queue/replay-count", page_replay_count, methods=["GET"]),
]
