"""Build the app for one Vercel function: the routes under the given path prefixes."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from aiqueue import logs
from aiqueue.errors import SettingsError
from aiqueue.settings import Settings, load_settings
from aiqueue.vercel.oidc import read_oidc_header
from aiqueue.vercel.vercel_json import Rewrite, VercelConfig, load, restore
from aiqueue.web.app import all_routes, create_app
from aiqueue.web.state import AppState

# What a process step does around its wait for the function (database round trips, the
# chain request), and what a live event stream does after its last event (closing).
STEP_HEADROOM_SECONDS = 10.0
STREAM_HEADROOM_SECONDS = 5.0


def vercel_app(
    prefixes: Sequence[str], *, dispatches: bool = True, streams: bool = False,
    env: Mapping[str, str] | None = None,
) -> Starlette:
    """An app with only the routes whose path starts with one of `prefixes`."""
    logs.setup()
    env = os.environ if env is None else env
    config = load()
    try:
        settings = load_settings(env)
        if env.get("VERCEL"):
            check_durations(settings, config, prefixes[0], dispatches=dispatches, streams=streams)
    except SettingsError as exc:
        print(f"aiqueue: {exc.detail}", file=sys.stderr)
        return _misconfigured(exc.detail)
    routes: list[BaseRoute] = [
        r for r in all_routes() if isinstance(r, Route) and r.path.startswith(tuple(prefixes))
    ]
    app = read_oidc_header(create_app(settings, routes=routes))
    app.add_middleware(FlushTraces, state=app.state.aiqueue)
    app.add_middleware(PublicPaths, rewrites=config.rewrites)
    return app


def check_durations(
    settings: Settings, config: VercelConfig, public_path: str, *, dispatches: bool, streams: bool
) -> None:
    """Refuse settings whose waits do not fit this function's maxDuration in vercel.json."""
    entry = config.function_of(public_path) or public_path
    limit = config.max_duration(entry)
    if limit is None:
        raise SettingsError(f"vercel.json gives {entry} no maxDuration")
    # A process step waits up to the dispatch timeout for the function's ack, or in
    # `sync` mode for its whole answer, inside this invocation.
    waits = [
        ("QUEUE_DISPATCH_TIMEOUT_SECONDS", settings.dispatch_timeout_seconds,
         STEP_HEADROOM_SECONDS, dispatches),
        ("QUEUE_EVENTS_MAX_SECONDS", settings.events_max_seconds, STREAM_HEADROOM_SECONDS, streams),
    ]
    for name, seconds, headroom, applies in waits:
        if applies and seconds + headroom > limit:
            raise SettingsError(
                f"{name}={seconds:g} does not fit {entry}'s maxDuration of {limit:g} s in "
                f"vercel.json (it needs {headroom:g} s more): lower it or raise maxDuration"
            )


class PublicPaths:
    """Put a request that arrived on a rewrite's destination back on its public path.

    Vercel's Python runtime hands the app whatever path the platform invokes it with: the
    public one (`/api/marking/enqueue`), or, since the platform applies rewrites as request
    path transforms, the destination (`/api/enqueue`, `/api/marking?path=queue/…/retry`).
    """

    def __init__(self, app: ASGIApp, rewrites: list[Rewrite]) -> None:
        self.app = app
        self.rewrites = rewrites

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            query = scope.get("query_string", b"").decode("latin-1")
            path, new_query = restore(self.rewrites, scope["path"], query)
            if path != scope["path"]:
                scope = {**scope, "path": path, "raw_path": quote(path).encode("ascii"),
                         "query_string": new_query.encode("latin-1")}
        await self.app(scope, receive, send)


class FlushTraces:
    """Send the spans a request made before its invocation may be frozen (docs/tracing.md).

    The app's call returns once the response is sent and its after-response
    work (the loop's step, a BackgroundTask) has run: what that work traced
    goes out then, not whenever the frozen instance thaws.
    """

    def __init__(self, app: ASGIApp, state: AppState) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            rt = self.state.runtime
            if scope["type"] == "http" and rt is not None and rt.tracer.on:
                # Spans leave before the invocation ends (docs/tracing.md).
                await rt.tracer.flush()


def _misconfigured(line: str) -> Starlette:
    async def answer(request: Request) -> Response:
        return JSONResponse({"error": "misconfigured", "detail": line}, status_code=503)

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])
