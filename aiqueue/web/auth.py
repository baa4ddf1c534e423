"""Operator login: signed session cookie, CSRF token per session, throttled failures.

The throttle lives in the database (every instance counts the same failures);
only a login attempt touches it, never a request that merely carries a cookie.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from aiqueue.errors import BadRequest, TooLarge, Unauthorized
from aiqueue.reads import monitor
from aiqueue.tokens import Tokens, same_secret
from aiqueue.web.state import app_state, runtime
from aiqueue.web.templating import render

COOKIE = "aiqueue_session"
SESSION_MAX_AGE = 12 * 3600
MAX_FORM_BYTES = 64 * 1024


@dataclass(frozen=True)
class Session:
    """A logged-in operator and the CSRF token bound to the session."""

    user: str
    csrf: str


async def read_form(request: Request) -> dict[str, str]:
    """A small urlencoded form, first value per field."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise TooLarge("the form is too large")
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=100)
    except (UnicodeDecodeError, ValueError):
        raise BadRequest("the form could not be read") from None
    return {key: values[0] for key, values in fields.items()}


def session_from_cookie(tokens: Tokens, cookie: str | None, *, now: float | None = None
                        ) -> Session | None:
    """The session a cookie proves: signed by us and younger than SESSION_MAX_AGE."""
    data = tokens.verify_session(cookie, max_age=SESSION_MAX_AGE, now=now)
    return Session(*data) if data else None


def current_session(request: Request) -> Session | None:
    """The operator session the request's cookie proves, if any (no database)."""
    return session_from_cookie(app_state(request).tokens, request.cookies.get(COOKIE))


def login_redirect(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/ai-queue/login?next={quote(target)}", status_code=303)


def check_csrf(session: Session, form: dict[str, str]) -> None:
    """A state-changing form must carry its session's CSRF token."""
    if not same_secret(form.get("csrf_token"), session.csrf):
        raise Unauthorized("the form's CSRF token is missing or wrong; reload the page")


def safe_next(value: str | None) -> str:
    # Only same-site paths: never redirect off to another host after login.
    if (value and value.startswith("/") and not value.startswith("//") and "\\" not in value
            and value.isprintable() and not any(c.isspace() for c in value)):
        return value
    return "/ai-queue"


async def login_page(request: Request) -> Response:
    return render("login.html", next=safe_next(request.query_params.get("next")), error=None)


async def login(request: Request) -> Response:
    state = app_state(request)
    key = request.client.host if request.client else "unknown"
    form = await read_form(request)
    target = safe_next(form.get("next"))
    rt = await runtime(request)
    if await monitor.login_blocked(rt, key):
        return render("login.html", status_code=429, next=target,
                      error="Too many failed attempts. Wait a few minutes and try again.")
    if not same_secret(form.get("password"), state.settings.admin_password):
        await monitor.login_failed(rt, key)
        return render("login.html", status_code=401, next=target, error="Wrong password.")
    token = state.tokens.session("admin", secrets.token_urlsafe(24))
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE, token, max_age=SESSION_MAX_AGE, httponly=True, samesite="lax",
        secure=_https(request), path="/",
    )
    return response


async def logout(request: Request) -> Response:
    session = current_session(request)
    if session is not None:
        check_csrf(session, await read_form(request))
    response = RedirectResponse("/ai-queue/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


def _https(request: Request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "")
    return request.url.scheme == "https" or forwarded.split(",")[0].strip() == "https"


ROUTES = [
    Route("/ai-queue/login", login_page, methods=["GET"]),
    Route("/ai-queue/login", login, methods=["POST"]),
    Route("/ai-queue/logout", logout, methods=["POST"]),
]
