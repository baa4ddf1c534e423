"""The local ASGI app: ack at once, mark in the background, post the callback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import modes, tracing
from .backends import Backend, make_backend
from .callback import mark_and_deliver
from .core import mark
from .invoke import (
    HttpError,
    check_bearer,
    check_envelope,
    decode_json,
    has_callback,
    retry_policy,
)
from .items import Item
from .job import safe_id
from .probe import is_probe
from .settings import Settings
from .signing import DispatchVerifier
from .tracing import Span, Tracer

log = logging.getLogger(__name__)

# A dispatch is small; render and parse carry a slice of a batch (the app sends
# under this many bytes of jobs or responses per call).
MAX_BODY_BYTES = 1 << 20


class Worker:
    """Runs marking jobs as referenced background tasks and counts those in flight."""

    def __init__(
        self,
        settings: Settings,
        backend: Backend | None = None,
        client: httpx.AsyncClient | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        self.settings = settings
        self.tracer = tracer or Tracer()
        self.tasks: set[asyncio.Task[None]] = set()
        self.in_flight = 0
        self._backend = backend
        self._client = client
        self._owns_client = client is None

    @property
    def client(self) -> httpx.AsyncClient:
        """The shared HTTP client, created on first use (ASGI test transports skip lifespan)."""
        if self._client is None:
            self._client = httpx.AsyncClient()
        return self._client

    @property
    def backend(self) -> Backend:
        """The configured backend, created on first use."""
        if self._backend is None:
            self._backend = make_backend(self.settings, self.client)
        return self._backend

    def submit(self, dispatch: Mapping[str, Any], traceparent: str | None = None) -> None:
        """Start marking `dispatch` in the background; the result goes to its callback.

        `traceparent`: the queue's dispatch span, which the marking's span joins.
        """
        # Counted before the task starts, so the count is right as soon as the 202 is sent.
        self.in_flight += 1
        task = asyncio.create_task(self._run(dispatch, self.tracer.start(traceparent, dispatch)))
        # The event loop holds tasks weakly: without this set a running job could vanish.
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def mark_now(self, dispatch: Mapping[str, Any], traceparent: str | None = None
                       ) -> Item:
        """Mark and return the item (the `/sync` route); a probe is also called back."""
        self.in_flight += 1
        span = self.tracer.start(traceparent, dispatch)
        item: Item = {}
        try:
            if is_probe(dispatch) and has_callback(dispatch):
                item, _ = await mark_and_deliver(dispatch, self.backend, self.client,
                                                 policy=retry_policy(self.settings))
                return item
            item = await mark(dispatch, self.backend)
            return item
        finally:
            span.end(item)
            self.in_flight -= 1

    async def drain(self) -> None:
        """Wait until every background job has finished."""
        while self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)

    async def close(self) -> None:
        """Finish the running jobs, then release the client if this worker made it."""
        await self.drain()
        self.tracer.close()
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _run(self, dispatch: Mapping[str, Any], span: Span) -> None:
        item: Item = {}
        try:
            item, _ = await mark_and_deliver(
                dispatch,
                self.backend,
                self.client,
                policy=retry_policy(self.settings),
                heartbeat_seconds=self.settings.heartbeat_seconds,
            )
        except Exception as exc:
            log.error(
                "background job crashed queue_id=%s error_type=%s",
                safe_id(dispatch.get("queue_id")),
                type(exc).__name__,
            )
        finally:
            span.end(item)
            self.in_flight -= 1


def create_app(
    settings: Settings | None = None,
    *,
    backend: Backend | None = None,
    client: httpx.AsyncClient | None = None,
    tracer: Tracer | None = None,
) -> Starlette:
    """The reference function as an ASGI app; explicit arguments beat the environment."""
    settings = Settings.from_env() if settings is None else settings
    worker = Worker(settings, backend, client, tracer or tracing.from_env())
    verifier = DispatchVerifier(settings.signing_secret) if settings.signing_secret else None

    async def accept(request: Request) -> Response:
        dispatch = await _dispatch(request, settings, verifier, need_callback=True)
        if modes.is_mode(dispatch):
            return JSONResponse(modes.answer(dispatch))
        worker.submit(dispatch, request.headers.get("traceparent"))
        answer = {"accepted": True, "queue_id": dispatch["queue_id"]}
        if is_probe(dispatch):
            answer["probe"] = True
        return JSONResponse(answer, status_code=202)

    async def sync(request: Request) -> Response:
        dispatch = await _dispatch(request, settings, verifier, need_callback=False)
        if modes.is_mode(dispatch):
            return JSONResponse(modes.answer(dispatch))
        return JSONResponse(await worker.mark_now(dispatch, request.headers.get("traceparent")))

    async def healthz(request: Request) -> Response:
        return JSONResponse(
            {"ok": True, "backend": settings.backend, "in_flight": worker.in_flight}
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await worker.close()

    app = Starlette(
        routes=[
            Route("/", accept, methods=["POST"]),
            Route("/mark", accept, methods=["POST"]),
            Route("/sync", sync, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ],
        exception_handlers={HttpError: _http_error},
        lifespan=lifespan,
    )
    app.state.worker = worker
    return app


async def _dispatch(request: Request, settings: Settings, verifier: DispatchVerifier | None, *,
                    need_callback: bool) -> dict[str, Any]:
    check_bearer(request.headers, settings.function_token)
    body = await bounded_body(request)
    message = verifier.verify(body, request.headers) if verifier is not None else None
    dispatch = decode_json(body)
    if modes.is_mode(dispatch):
        return dispatch  # render/parse call no model: a replay costs nothing
    check_envelope(dispatch, need_callback=need_callback)
    if verifier is not None and message is not None:
        # Only a dispatch that is about to be worked on counts as accepted.
        verifier.accept_once(message)
    return dispatch


async def bounded_body(request: Request) -> bytes:
    """The body, refused with 413 before it is read past MAX_BODY_BYTES: by its declared
    length, else (a chunked body declares none) as soon as the chunks pass the bound."""
    too_large = HttpError(413, "too_large", f"the body exceeds {MAX_BODY_BYTES} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HttpError)
    return JSONResponse(exc.body(), status_code=exc.status)
