"""The operator's session: a signed cookie holding the user and its CSRF token.

What gate.py checks (and login.py issues): the session a cookie proves, the
form a request posts and whether it carries the session's CSRF token.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import RedirectResponse

from aiqueue.errors import BadRequest, TooLarge, Unauthorized
from aiqueue.tokens import Tokens, same_secret
from aiqueue.web.state import app_state

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
