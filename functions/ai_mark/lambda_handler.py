"""AWS Lambda entry point: `handler(event, context)`."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any

from . import modes
from .errors import SettingsError
from .invoke import (
    HttpError,
    accepted_body,
    check_bearer,
    check_envelope,
    decode_json,
    lower_headers,
    raw_body,
    run_async,
    run_sync,
)
from .job import safe_id
from .settings import Settings, require_closed
from .signing import accept, authenticate

log = logging.getLogger(__name__)

Response = dict[str, Any]


def handler(event: dict[str, Any], context: object = None) -> Response:
    """HTTP event: answer with the result item; `Event` invoke: post it to the callback."""
    try:
        settings = Settings.from_env()
        # A function URL may be public (auth type NONE): never run it open.
        require_closed(settings)
    except SettingsError as exc:
        log.error("misconfigured: %s", exc)
        return _response(500, HttpError(500, "misconfigured", str(exc)).body())
    return asyncio.run(handle(event, settings))


async def handle(event: Mapping[str, Any], settings: Settings) -> Response:
    """The whole function, minus reading the environment and starting the event loop."""
    try:
        if _is_http(event):
            return await _http(event, settings)
        return await _event(event, settings)
    except HttpError as exc:
        log.warning("rejected queue_id=%s http=%d", safe_id(event.get("queue_id")), exc.status)
        return _response(exc.status, exc.body())


def _is_http(event: Mapping[str, Any]) -> bool:
    """A function URL / HTTP API (payload 2.0) or REST API proxy (1.0) request."""
    context = event.get("requestContext")
    return (isinstance(context, Mapping) and "http" in context) or "httpMethod" in event


async def _http(event: Mapping[str, Any], settings: Settings) -> Response:
    context = event.get("requestContext")
    http = context.get("http") if isinstance(context, Mapping) else None
    method = http.get("method") if isinstance(http, Mapping) else event.get("httpMethod")
    headers = lower_headers(event.get("headers"))
    check_bearer(headers, settings.function_token)
    if str(method).upper() != "POST":
        raise HttpError(405, "method_not_allowed", "POST a dispatch")
    raw = raw_body(event.get("body"), base64_encoded=bool(event.get("isBase64Encoded")))
    # The function URL's token and, when set, the signature over the raw body.
    message = authenticate(headers, raw, settings)
    dispatch = decode_json(raw)
    if modes.is_mode(dispatch):
        return _response(200, modes.answer(dispatch))
    check_envelope(dispatch, need_callback=False)
    accept(message, settings)
    return _response(200, await run_sync(dispatch, settings))


async def _event(event: Mapping[str, Any], settings: Settings) -> Response:
    """An asynchronous invoke; nobody reads the answer, so the callback carries the result."""
    message = None
    if "headers" in event and "body" in event:
        # API Gateway's async integration (X-Amz-Invocation-Type: Event) with a mapping
        # template that forwards the headers: the token (and signature) can and must be checked.
        body = event["body"]
        raw = None if isinstance(body, Mapping) else raw_body(body)
        message = authenticate(lower_headers(event["headers"]), raw, settings)
        dispatch = decode_json(raw if raw is not None else body)
    else:
        # A raw dispatch from `aws lambda invoke --invocation-type Event`: IAM authorised it.
        dispatch = dict(event)
    check_envelope(dispatch, need_callback=True)
    accept(message, settings)
    item, delivered = await run_async(dispatch, settings)
    return _response(202, accepted_body(item, delivered))


def _response(status: int, body: Any) -> Response:
    return {
        "statusCode": status,
        "headers": {"content-type": "application/json"},
        "body": json.dumps(body),
    }
