"""Build the app for one Vercel function: the routes under the given path prefixes."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from aiqueue import logs
from aiqueue.errors import SettingsError
from aiqueue.settings import load_settings
from aiqueue.web.app import all_routes, create_app


def vercel_app(prefixes: Sequence[str]) -> Starlette:
    """An app with only the routes whose path starts with one of `prefixes`."""
    logs.setup()
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"aiqueue: {exc.detail}", file=sys.stderr)
        return _misconfigured(exc.detail)
    routes: list[BaseRoute] = [
        r for r in all_routes() if isinstance(r, Route) and r.path.startswith(tuple(prefixes))
    ]
    return create_app(settings, routes=routes)


def _misconfigured(line: str) -> Starlette:
    async def answer(request: Request) -> Response:
        return JSONResponse({"error": "misconfigured", "detail": line}, status_code=503)

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])
