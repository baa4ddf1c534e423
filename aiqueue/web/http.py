"""Request helpers shared by every route: bounded JSON bodies, bearer checks, errors."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from aiqueue.errors import AiQueueError, BadRequest, Invalid, TooLarge, Unauthorized
from aiqueue.tokens import same_secret
from aiqueue.wire import Wire, dump

MAX_BODY_BYTES = 1024 * 1024


def respond(answer: Wire, status_code: int = 200, **kwargs: Any) -> JSONResponse:
    """An answer's type as the response body: the one place answers become JSON."""
    return JSONResponse(dump(answer), status_code=status_code, **kwargs)


async def read_json(request: Request, limit: int = MAX_BODY_BYTES, *,
                    optional: bool = False, empty: Any = None) -> Any:
    """The body as JSON, refusing oversize (413) and non-JSON (400) bodies.

    With `optional`, an empty body is `empty` (None unless the caller tells it apart
    from a JSON `null`).
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise BadRequest("Content-Length is not a number")
        if int(declared) > limit:
            raise TooLarge(f"the body must be at most {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"the body must be at most {limit} bytes")
        chunks.append(chunk)
    if optional and not b"".join(chunks).strip():
        return empty
    try:
        return json.loads(b"".join(chunks), parse_constant=_not_json)
    except (ValueError, RecursionError):
        raise BadRequest("the body is not valid JSON") from None


def _not_json(name: str) -> None:
    # Python reads NaN and Infinity; JSON (and PostgreSQL's jsonb) has neither.
    raise ValueError(f"{name} is not JSON")


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def require_bearer(request: Request, *accepted: str | None) -> None:
    """401 unless the bearer token equals one of the accepted secrets (constant time)."""
    given = bearer(request)
    # Compare against every candidate so timing does not tell which one matched.
    matches = [same_secret(given, secret) for secret in accepted if secret]
    if not any(matches):
        raise Unauthorized("missing or wrong bearer token")


def error_response(exc: AiQueueError) -> JSONResponse:
    body: dict[str, Any] = {"error": exc.code, "detail": exc.detail, **exc.extra}
    headers = {"www-authenticate": "Bearer"} if exc.status_code == 401 else {}
    if exc.retry_after is not None:
        headers["retry-after"] = str(exc.retry_after)
    return JSONResponse(body, status_code=exc.status_code, headers=headers)


def query_int(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Invalid(f"{name} must be an integer") from None
    if not lo <= value <= hi:
        raise Invalid(f"{name} must be between {lo} and {hi}")
    return value
