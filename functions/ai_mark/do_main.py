"""DigitalOcean Functions entry point: `main(event, context)`."""

from __future__ import annotations

import asyncio
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
_JSON = {"Content-Type": "application/json"}


def main(event: dict[str, Any], context: object = None) -> Response:
    """Web invocation: answer with the result item; plain invocation: post it to the callback."""
    try:
        settings = Settings.from_env()
        # `web: raw` with `webSecure: false` is a public URL: never run it open.
        require_closed(settings)
    except SettingsError as exc:
        log.error("misconfigured: %s", exc)
        return _error(HttpError(500, "misconfigured", str(exc)))
    return asyncio.run(handle(event, settings))


async def handle(event: Mapping[str, Any], settings: Settings) -> Response:
    """The whole function, minus reading the environment and starting the event loop."""
    try:
        if "http" in event or "__ow_method" in event:
            return await _web(event, settings)
        # No web event: invoked directly (`doctl serverless functions invoke`, a trigger, the
        # activations API), and the platform has already authenticated the caller.
        check_envelope(event, need_callback=True)
        item, delivered = await run_async(event, settings)
        # The activation record keeps what the action returns: `callback` carries the
        # item it posted (or tried to), so the queue can apply a result whose callback
        # was lost without calling the model again (docs/guarantees.md).
        return {"statusCode": 202, "headers": _JSON, "body": accepted_body(item, delivered),
                "callback": [item]}
    except HttpError as exc:
        log.warning("rejected queue_id=%s http=%d", safe_id(event.get("queue_id")), exc.status)
        return _error(exc)


async def _web(event: Mapping[str, Any], settings: Settings) -> Response:
    method, headers, raw = _web_request(event)
    check_bearer(headers, settings.function_token)
    if method != "POST":
        raise HttpError(405, "method_not_allowed", "POST a dispatch")
    # The web action's URL is public: the token and, when set, the signature.
    message = authenticate(headers, raw, settings)
    dispatch = decode_json(raw) if raw is not None else _parsed_fields(event)
    if modes.is_mode(dispatch):
        # render/parse call no model: a replay costs nothing, so no replay guard.
        return {"statusCode": 200, "headers": _JSON, "body": modes.answer(dispatch)}
    check_envelope(dispatch, need_callback=False)
    accept(message, settings)
    return {"statusCode": 200, "headers": _JSON, "body": await run_sync(dispatch, settings)}


def _web_request(event: Mapping[str, Any]) -> tuple[str, dict[str, str], bytes | None]:
    """(method, headers, raw body) from the new (`http`) or the OpenWhisk (`__ow_*`) shape.

    The raw body is None under `web: true`, where the platform parsed it.
    """
    http = event.get("http")
    if isinstance(http, Mapping):
        method, headers = str(http.get("method", "POST")), lower_headers(http.get("headers"))
        if "body" in http:  # `web: raw`: the body arrives untouched
            encoded = bool(http.get("isBase64Encoded"))
            return method.upper(), headers, raw_body(http["body"], base64_encoded=encoded)
    elif "__ow_method" in event:
        method, headers = str(event["__ow_method"]), lower_headers(event.get("__ow_headers"))
        if "__ow_body" in event:
            body = event["__ow_body"]
            # OpenWhisk base64-encodes raw bodies it does not consider text.
            encoded = isinstance(body, str) and not body.lstrip().startswith(("{", "["))
            return method.upper(), headers, raw_body(body, base64_encoded=encoded)
    else:
        raise HttpError(400, "invalid_event", "the web event has neither http nor __ow_method")
    return method.upper(), headers, None


def _parsed_fields(event: Mapping[str, Any]) -> dict[str, Any]:
    """`web: true`: the platform parsed the JSON body into the event's top-level keys."""
    return {k: v for k, v in event.items() if k != "http" and not k.startswith("__ow_")}


def _error(exc: HttpError) -> Response:
    return {"statusCode": exc.status, "headers": _JSON, "body": exc.body()}
