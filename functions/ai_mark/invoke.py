"""What the serverless entry points share: auth, body decoding, envelope checks, running."""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Mapping
from typing import Any

import httpx

from .backends import make_backend
from .callback import RetryPolicy, mark_and_deliver
from .core import mark
from .errors import AiMarkError
from .items import Item
from .probe import is_probe
from .settings import Settings


class HttpError(AiMarkError):
    """A request the entry point answers with an error status instead of marking."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail

    def body(self) -> dict[str, str]:
        """The contract's error body."""
        return {"error": self.code, "detail": self.detail}


def lower_headers(headers: object) -> dict[str, str]:
    """Headers with lower-case names (platforms differ in case)."""
    if not isinstance(headers, Mapping):
        return {}
    return {str(k).lower(): str(v) for k, v in headers.items()}


def check_bearer(headers: Mapping[str, str], expected: str | None) -> None:
    """Raise 401 unless `Authorization: Bearer <expected>` is present (no token set: open)."""
    if not expected:
        return
    given = headers.get("authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        token.strip().encode(), expected.encode()
    ):
        raise HttpError(401, "unauthorized", "missing or wrong bearer token")


def raw_body(body: object, *, base64_encoded: bool = False) -> bytes:
    """The body's bytes as the caller sent them (base64 undone), else raise 400."""
    if not isinstance(body, str | bytes) or not body:
        raise HttpError(400, "invalid_json", "the request body must be a JSON object")
    try:
        if base64_encoded:
            return base64.b64decode(body, validate=True)
        return body.encode() if isinstance(body, str) else body
    except (binascii.Error, ValueError):
        raise HttpError(400, "invalid_json", "the request body is not valid JSON") from None


def decode_json(body: object, *, base64_encoded: bool = False) -> dict[str, Any]:
    """Parse a (maybe base64) JSON body into an object, else raise 400/422."""
    if isinstance(body, Mapping):
        return dict(body)
    raw = raw_body(body, base64_encoded=base64_encoded)
    try:
        data = json.loads(raw)
    except ValueError:
        raise HttpError(400, "invalid_json", "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise HttpError(422, "invalid_dispatch", "the dispatch must be a JSON object")
    return data


def check_envelope(dispatch: Mapping[str, Any], *, need_callback: bool) -> None:
    """Raise 422 when no result item could be addressed (or, async, delivered) at all."""
    for field in ("queue_id", "callback_token"):
        if not isinstance(dispatch.get(field), str) or not dispatch[field]:
            raise HttpError(422, "invalid_dispatch", f"{field} must be a non-empty string")
    if need_callback and not has_callback(dispatch):
        raise HttpError(422, "invalid_dispatch", "callback_url must be an http(s) URL")


def retry_policy(settings: Settings) -> RetryPolicy:
    """The callback retry policy the settings describe."""
    return RetryPolicy(tries=settings.callback_tries, base_delay=settings.callback_backoff)


async def run_sync(dispatch: Mapping[str, Any], settings: Settings) -> Item:
    """Mark and return the item (the app's `sync` mode); a probe is also called back."""
    if is_probe(dispatch) and has_callback(dispatch):
        item, _ = await run_async(dispatch, settings)
        return item
    # A client per invocation: serverless runtimes start a fresh event loop for each one.
    async with httpx.AsyncClient() as client:
        return await mark(dispatch, make_backend(settings, client))


def has_callback(dispatch: Mapping[str, Any]) -> bool:
    url = dispatch.get("callback_url")
    return isinstance(url, str) and url.startswith(("http://", "https://"))


async def run_async(dispatch: Mapping[str, Any], settings: Settings) -> tuple[Item, bool]:
    """Mark and post the item to `callback_url`; (item, delivered)."""
    async with httpx.AsyncClient() as client:
        return await mark_and_deliver(
            dispatch,
            make_backend(settings, client),
            client,
            policy=retry_policy(settings),
            heartbeat_seconds=settings.heartbeat_seconds,
        )


def accepted_body(item: Item, delivered: bool) -> dict[str, Any]:
    """What an async invocation returns: ids and outcome only, never the result."""
    return {
        "accepted": True,
        "queue_id": item.get("queue_id"),
        "status": item.get("status"),
        "delivered": delivered,
    }
