"""create_app(settings): the one ASGI app serving every route (also per Vercel function)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from aiqueue import logs
from aiqueue.errors import AiQueueError, SchemaBehind
from aiqueue.queue.loop import tick_forever
from aiqueue.runtime import Clock, database_clock
from aiqueue.settings import Settings
from aiqueue.web import (
    api,
    calibration_api,
    canary_api,
    holds_api,
    holds_page,
    live_api,
    login,
    monitor_actions,
    monitor_page,
    openapi,
    records,
    remark_api,
    rows_api,
    setup,
    teacher_page,
)
from aiqueue.web.http import error_response
from aiqueue.web.state import AppState
from aiqueue.web.views.text import DISPLAY_ZONE

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 400: "bad_request"}


async def _domain_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AiQueueError)
    # schema_behind is logged once per instance where it is found (runtime.py), not per request.
    if exc.status_code >= 500 and not isinstance(exc, SchemaBehind):
        logs.event("error", code=exc.code, path=request.url.path)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return JSONResponse({"error": code, "detail": str(exc.detail)}, status_code=exc.status_code,
                        headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> Response:
    # Never a traceback to the user, and no exception text in the log either:
    # it may carry row content.
    logs.event("error", code=type(exc).__name__, path=request.url.path)
    return JSONResponse({"error": "internal_error", "detail": "internal error; see the server log"},
                        status_code=500)


def create_app(
    settings: Settings, *, routes: Sequence[BaseRoute] | None = None, ticker: bool = False,
    clock: Clock = database_clock,
) -> Starlette:
    """Build the app; `ticker` runs the in-process safety net (serve/dev)."""
    state = AppState(settings, clock)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = None
        if ticker and settings.tick_seconds > 0:
            # The safety net starts whatever the schema (a step behind it fails and logs).
            task = asyncio.create_task(tick_forever(await state.get(check_schema=False)))
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await state.close()

    app = Starlette(
        routes=list(routes if routes is not None else all_routes()),
        lifespan=lifespan,
        exception_handlers={
            AiQueueError: _domain_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )
    app.state.aiqueue = state
    app.add_middleware(DisplayZone, zone=settings.timezone)
    return app


class DisplayZone:
    """Every request's pages show times where the school is (QUEUE_TIMEZONE)."""

    def __init__(self, app: ASGIApp, zone: str) -> None:
        self.app, self.zone = app, zone

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = DISPLAY_ZONE.set(self.zone)
        try:
            await self.app(scope, receive, send)
        finally:
            DISPLAY_ZONE.reset(token)


def all_routes() -> list[BaseRoute]:
    return [*api.ROUTES, *login.ROUTES, *monitor_page.ROUTES, *monitor_actions.ROUTES,
            *live_api.ROUTES, *teacher_page.ROUTES, *setup.ROUTES, *openapi.ROUTES,
            *records.ROUTES, *calibration_api.ROUTES, *rows_api.ROUTES, *remark_api.ROUTES,
            *canary_api.ROUTES, *holds_api.ROUTES, *holds_page.ROUTES]
