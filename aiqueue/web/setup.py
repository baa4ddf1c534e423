"""The doctor's report over HTTP (docs/operating/doctor.md): `GET /api/marking/doctor` (bearer) and
the Setup panel of /ai-queue, which loads it on demand (never on the page's polls)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aiqueue.doctor.checks import run_doctor
from aiqueue.doctor.report import Report
from aiqueue.errors import StoreError
from aiqueue.runtime import Runtime
from aiqueue.web import gate
from aiqueue.web.auth import Session
from aiqueue.web.state import app_state
from aiqueue.web.templating import render


async def _report(request: Request) -> Report:
    state = app_state(request)
    rt: Runtime | None
    try:
        # The doctor reports a schema behind the code; it must not be refused for it.
        rt = await state.get(check_schema=False)
    except StoreError:
        rt = None  # the report's database line says why
    return await run_doctor(state.settings, rt)


@gate.bearer()
async def doctor_json(request: Request) -> Response:
    report = await _report(request)
    return JSONResponse(report.to_json(), headers={"cache-control": "no-store"})


@gate.session(gate.unauthorized)
async def doctor_panel(request: Request, session: Session) -> Response:
    """The Setup panel's body, fetched when the operator asks for it."""
    report = await _report(request)
    return render("ai_queue_doctor.html", report=report)


ROUTES = [
    Route("/api/marking/doctor", doctor_json, methods=["GET"]),
    Route("/ai-queue/doctor", doctor_panel, methods=["GET"]),
]
