"""The per-function app: public paths restored from rewrite destinations, durations checked."""

from __future__ import annotations

import base64
import json
import time
from types import SimpleNamespace
from typing import cast

import httpx
import pytest
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aiqueue.errors import SettingsError
from aiqueue.settings import load_settings
from aiqueue.tracing import Tracer
from aiqueue.vercel import PublicPaths, check_durations, vercel_app
from aiqueue.vercel.app import FlushTraces
from aiqueue.vercel.vercel_json import load
from aiqueue.web.state import AppState

CONF = load()
ENV = {
    "VERCEL": "1",
    "VERCEL_PROJECT_PRODUCTION_URL": "marking.vercel.app",
    "DATABASE_URL": "postgresql://u@127.0.0.1:1/db",
    "MARKING_QUEUE_SECRET": "unit-secret-0123456789abcdef",
    "AI_MARKING_FUNCTION_URL": "https://function.test/mark",
}


async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"path": request.url.path, "query": request.url.query,
                         "params": dict(request.path_params)})


def echo_app() -> Starlette:
    app = Starlette(routes=[
        Route("/api/marking/queue/{queue_id}/retry", echo, methods=["POST"]),
        Route("/api/marking/enqueue", echo, methods=["POST"]),
        Route("/api/marking/assignments/{assignment_id}/progress", echo),
        Route("/ai-queue", echo), Route("/metrics", echo), Route("/healthz", echo),
    ])
    app.add_middleware(PublicPaths, rewrites=CONF.rewrites)
    return app


async def call(app: Starlette, method: str, url: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fn.test") as client:
        return await client.request(method, url)


@pytest.mark.parametrize(("method", "url", "path", "query"), [
    ("POST", "/api/enqueue", "/api/marking/enqueue", ""),
    ("POST", "/api/marking/enqueue", "/api/marking/enqueue", ""),
    ("POST", "/api/marking?path=queue/q1/retry&x=1", "/api/marking/queue/q1/retry", "x=1"),
    ("POST", "/api/marking/queue/q1/retry?x=1", "/api/marking/queue/q1/retry", "x=1"),
    ("GET", "/api/ai_queue?path=", "/ai-queue", ""),
    ("GET", "/api/marking?path=assignments/hw%207/progress",
     "/api/marking/assignments/hw 7/progress", ""),
    ("GET", "/api/marking/assignments/hw%207/progress", "/api/marking/assignments/hw 7/progress",
     ""),
    ("GET", "/api/health?route=metrics", "/metrics", ""),
    ("GET", "/api/health?route=healthz", "/healthz", ""),
])
async def test_either_form_reaches_the_public_route(method, url, path, query):
    answer = await call(echo_app(), method, url)
    assert answer.status_code == 200
    assert answer.json()["path"] == path and answer.json()["query"] == query
    if "assignments" in path:
        assert answer.json()["params"] == {"assignment_id": "hw 7"}


def test_default_settings_fit_every_function():
    settings = load_settings(ENV)
    for public in ("/api/marking/process-queue", "/api/marking/enqueue", "/webhooks/ai-mark",
                   "/results", "/ai-queue", "/api/marking/queue"):
        check_durations(settings, CONF, public, dispatches=True, streams=True)


def test_a_sync_timeout_beyond_max_duration_is_refused_naming_the_variable():
    settings = load_settings({**ENV, "AI_MARKING_FUNCTION_MODE": "sync",
                              "QUEUE_DISPATCH_TIMEOUT_SECONDS": "150"})
    with pytest.raises(SettingsError) as err:
        check_durations(settings, CONF, "/api/marking/process-queue", dispatches=True,
                        streams=False)
    assert err.value.detail.startswith("QUEUE_DISPATCH_TIMEOUT_SECONDS=150 does not fit")
    assert "api/process_queue.py" in err.value.detail and "\n" not in err.value.detail
    # The health function never dispatches, so the same settings are fine there.
    check_durations(settings, CONF, "/healthz", dispatches=False, streams=False)


def test_an_event_stream_longer_than_max_duration_is_refused():
    settings = load_settings({**ENV, "QUEUE_EVENTS_MAX_SECONDS": "250"})
    with pytest.raises(SettingsError, match="^QUEUE_EVENTS_MAX_SECONDS=250 does not fit"):
        check_durations(settings, CONF, "/api/marking/events", dispatches=True, streams=True)


async def test_on_vercel_the_function_answers_503_with_the_one_line(capsys):
    env = {**ENV, "AI_MARKING_FUNCTION_MODE": "sync", "QUEUE_DISPATCH_TIMEOUT_SECONDS": "55"}
    app = vercel_app(["/api/marking/process-queue"], env=env)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "QUEUE_DISPATCH_TIMEOUT_SECONDS=55" in err[0]
    answer = await call(app, "POST", "/api/marking/process-queue")
    assert answer.status_code == 503 and answer.json()["error"] == "misconfigured"


def test_off_vercel_the_durations_are_not_checked():
    env = {k: v for k, v in ENV.items() if k != "VERCEL"}
    env.update({"AIQUEUE_ENV": "production", "QUEUE_DISPATCH_TIMEOUT_SECONDS": "150"})
    app = vercel_app(["/api/marking/process-queue"], env=env)
    assert any(getattr(r, "path", "") == "/api/marking/process-queue" for r in app.routes)


def _function_prefixes() -> dict[str, list[str]]:
    """Each api/*.py function's path prefixes, read from its vercel_app([...]) call."""
    import ast

    from aiqueue.paths import ROOT

    found: dict[str, list[str]] = {}
    for path in ROOT.joinpath("api").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "vercel_app"
                    and isinstance(node.args[0], ast.List)):
                found[str(path.relative_to(ROOT))] = [
                    str(e.value) for e in node.args[0].elts if isinstance(e, ast.Constant)]
    return found


def test_every_route_of_the_app_is_served_by_a_vercel_function():
    from aiqueue.web.app import all_routes

    prefixes = tuple(p for ps in _function_prefixes().values() for p in ps)
    assert len(prefixes) > 10, "the scan finds the functions' prefixes"
    paths = {r.path for r in all_routes() if isinstance(r, Route)}
    assert {p for p in paths if not p.startswith(prefixes)} == set()


def _vercel_jwt(expires_in: float) -> str:
    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    claims = {"iss": "https://oidc.vercel.com/acme", "exp": int(time.time() + expires_in)}
    return ".".join([part({"alg": "RS256", "typ": "JWT"}), part(claims), "c2ln"])


async def test_a_function_keeps_the_freshest_oidc_token_its_requests_bring():
    app = vercel_app(["/healthz"], dispatches=False, env=ENV)
    oidc = app.state.aiqueue.oidc
    fresh, junk = _vercel_jwt(3600), "not-a-jwt"
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://x") as client:
        await client.get("/nowhere", headers={"x-vercel-oidc-token": fresh})
        assert oidc.value == fresh
        # A junk or older header never replaces it, whatever the route answers.
        await client.get("/nowhere", headers={"x-vercel-oidc-token": junk})
        await client.get("/nowhere", headers={"x-vercel-oidc-token": _vercel_jwt(60)})
    assert oidc.value == fresh


class CountingTracer(Tracer):
    on = True

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def flush(self) -> None:
        self.log.append("flush")


async def test_traces_are_flushed_after_the_answer_and_its_background_work():
    log: list[str] = []

    async def answer(request: Request) -> JSONResponse:
        return JSONResponse({}, background=BackgroundTask(log.append, "after the answer"))

    state = cast(AppState, SimpleNamespace(runtime=SimpleNamespace(tracer=CountingTracer(log))))
    app = Starlette(routes=[Route("/api/marking/enqueue", answer, methods=["POST"])])
    app.add_middleware(FlushTraces, state=state)
    assert (await call(app, "POST", "/api/marking/enqueue")).status_code == 200
    assert log == ["after the answer", "flush"]
    # Tracing off (or no runtime yet): nothing to flush.
    state.runtime = None
    await call(app, "POST", "/api/marking/enqueue")
    assert log == ["after the answer", "flush", "after the answer"]


def test_the_vercel_app_flushes_traces():
    app = vercel_app(["/api/marking/enqueue"], env={**ENV, "VERCEL": ""})
    assert any(cast(object, m.cls) is FlushTraces for m in app.user_middleware)
