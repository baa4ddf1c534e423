"""`python -m aiqueue dev`: embedded PostgreSQL, migrations, demo data, app, function, ticker.

Both servers run in this process on one event loop. Ctrl-C stops them in an
order that loses nothing: the function first refuses new work with 503 (the
queue puts such a row back without using an attempt), finishes what it holds and
calls back, then the app and the function stop. Rows still pending are picked up
by the ticker of the next run; a hard kill leaves `processing` rows for the stuck
recovery (60 s in dev unless QUEUE_STUCK_AFTER_SECONDS says otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Any

import uvicorn
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from aiqueue import logs
from aiqueue.db.embedded import database_for
from aiqueue.db.migrate import migrate
from aiqueue.db.store import Store, connect_pool
from aiqueue.dev import demo
from aiqueue.dev.defaults import given as _given
from aiqueue.dev.defaults import load_dev
from aiqueue.errors import SettingsError
from aiqueue.settings import Settings
from aiqueue.vercel.oidc import read_oidc_header
from aiqueue.web.app import create_app
from aiqueue.web.live_api import close_streams
from aiqueue.web.teacher_views import page_url

DEV_SIMULATE_LATENCY = 1.5


def run_dev(host: str, port: int, function_port: int) -> None:
    """Run everything until Ctrl-C (or SIGTERM), then stop cleanly."""
    env = os.environ
    settings = load_dev(env, port, function_port)
    settings, handle = database_for(settings)
    try:
        asyncio.run(_main(settings, host, port, function_port,
                          bundled_function=not _given(env, "AI_MARKING_FUNCTION_URL")))
    finally:
        if handle is not None:
            handle.cleanup()


class _Server(uvicorn.Server):
    """A uvicorn server that leaves Ctrl-C to the dev command (two servers share it)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class _Draining:
    """While the dev command stops, the function answers new dispatches with 503."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.draining = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.draining and scope["type"] == "http" and scope["method"] == "POST":
            body = {"error": "shutting_down", "detail": "the dev server is stopping"}
            refuse = JSONResponse(body, status_code=503, headers={"retry-after": "2"})
            await refuse(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _function_app(settings: Settings) -> tuple[_Draining, Any]:
    """The reference function (simulator unless AI_MARK_BACKEND says otherwise), and its worker."""
    from functions.ai_mark.server import create_app as create_function
    from functions.ai_mark.settings import Settings as FunctionSettings
    from functions.ai_mark.simulate import SimulatorBackend

    fs = FunctionSettings.from_env()
    if not _given(os.environ, "AI_MARK_SIMULATE_LATENCY"):
        fs = dataclasses.replace(fs, simulate_latency=DEV_SIMULATE_LATENCY)
    fs = dataclasses.replace(fs, function_token=settings.function_token)
    backend = None
    if fs.backend == "simulate":
        async def jitter(seconds: float) -> None:
            # 1-2 s per answer at the default, so marks arrive at a believable pace.
            await asyncio.sleep(seconds * random.uniform(2 / 3, 4 / 3))

        backend = SimulatorBackend(fs.simulate_latency, fs.simulate_failure_rate, sleep=jitter)
    app = create_function(fs, backend=backend)
    return _Draining(app), app.state.worker


def _server(app: ASGIApp, host: str, port: int) -> _Server:
    # log_config=None: uvicorn's records go through logs.setup's content-free formatter.
    return _Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                  access_log=False, lifespan="on", timeout_graceful_shutdown=3,
                                  log_config=None))


async def _prepare(settings: Settings) -> int:
    assert settings.database_url and settings.database_direct_url
    applied = await migrate(settings.database_direct_url, "up")
    logs.event("migrate", count=len(applied))
    store = Store(await connect_pool(settings.database_url, max_size=2,
                                     prepared=settings.database_prepared_statements))
    try:
        return await demo.seed(store)
    finally:
        await store.close()


def _bind(host: str, port: int, what: str, flag: str) -> socket.socket:
    """Bind before anything starts, so a busy port is one clear line, not a traceback."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise SettingsError(f"the {what} cannot listen on {host}:{port}; "
                            f"is it in use? choose another port with {flag}") from None
    return sock


async def _start(servers: list[tuple[_Server, socket.socket]]) -> list[asyncio.Task[None]]:
    tasks = [asyncio.create_task(server.serve(sockets=[sock])) for server, sock in servers]
    while not all(server.started for server, _ in servers):
        if any(task.done() for task in tasks):
            raise SettingsError("a server stopped while starting; see the log above")
        await asyncio.sleep(0.05)
    return tasks


async def _main(settings: Settings, host: str, port: int, function_port: int,
                bundled_function: bool) -> None:
    servers: list[tuple[_Server, socket.socket]] = []
    fn_app, worker = _function_app(settings) if bundled_function else (None, None)
    if fn_app is not None:
        fn_sock = _bind(host, function_port, "marking function", "--function-port")
        servers.append((_server(fn_app, host, function_port), fn_sock))
    app_sock = _bind(host, port, "app", "--port")
    seeded = await _prepare(settings)
    app = read_oidc_header(create_app(settings, ticker=True))
    servers.append((_server(app, host, port), app_sock))
    tasks = await _start(servers)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    _banner(settings, port, function_port if bundled_function else None, seeded)
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    print("\nstopping: finishing the answers being marked ...", flush=True)

    forced = asyncio.Event()

    def force() -> None:
        # A second Ctrl-C: stop now; rows being marked are recovered on the next run.
        forced.set()
        for server, _ in servers:
            server.force_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, force)
    if fn_app is not None and worker is not None:
        fn_app.draining = True
        drained, give_up = asyncio.create_task(worker.drain()), asyncio.create_task(forced.wait())
        await asyncio.wait([drained, give_up], timeout=30, return_when=asyncio.FIRST_COMPLETED)
        give_up.cancel()
    await close_streams(app)
    # The app first (its ticker stops, requests in flight finish), then the function.
    for (server, _), task in reversed(list(zip(servers, tasks, strict=True))):
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)
    print("stopped; answers still waiting are marked on the next run.", flush=True)


def _banner(settings: Settings, port: int, function_port: int | None, seeded: int) -> None:
    base = settings.app_base_url
    lines = [
        "",
        "aiqueue dev is running (Ctrl-C stops it; nothing is lost)",
        f"  Teacher page:     {base}{page_url(demo.ASSIGNMENT_ID)}",
        f"  Queue monitor:    {base}/ai-queue",
        f"  Sign in with:     {settings.admin_password}",
    ]
    if function_port is not None:
        lines.append(f"  Marking function: http://127.0.0.1:{function_port}/ "
                     "(the simulator unless AI_MARK_BACKEND is set)")
    else:
        lines.append(f"  Marking function: {settings.function_url}")
    where = "DATABASE_URL" if os.environ.get("DATABASE_URL") else "embedded PostgreSQL in .data/pg"
    lines += [f"  Database:         {where}; demo class: {len(demo.ANSWERS)} answers"
              f" ({seeded} added now)", ""]
    print("\n".join(lines), flush=True)
    sys.stdout.flush()
