"""Operator login and logout, with failed logins throttled.

The throttle lives in the database (every instance counts the same failures);
only a login attempt touches it, never a request that merely carries a cookie.
"""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from aiqueue.queue import actions
from aiqueue.tokens import same_secret
from aiqueue.web import gate
from aiqueue.web.auth import COOKIE, SESSION_MAX_AGE, Session, read_form, safe_next
from aiqueue.web.state import app_state, runtime
from aiqueue.web.templating import render


async def login_page(request: Request) -> Response:
    return render("login.html", next=safe_next(request.query_params.get("next")), error=None)


async def login(request: Request) -> Response:
    state = app_state(request)
    key = request.client.host if request.client else "unknown"
    form = await read_form(request)
    target = safe_next(form.get("next"))
    rt = await runtime(request)
    if await actions.login_blocked(rt, key):
        return render("login.html", status_code=429, next=target,
                      error="Too many failed attempts. Wait a few minutes and try again.")
    if not same_secret(form.get("password"), state.settings.admin_password):
        await actions.login_failed(rt, key)
        return render("login.html", status_code=401, next=target, error="Wrong password.")
    token = state.tokens.session("admin", secrets.token_urlsafe(24))
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE, token, max_age=SESSION_MAX_AGE, httponly=True, samesite="lax",
        secure=_https(request), path="/",
    )
    return response


async def _signed_out(request: Request) -> Response:
    response = RedirectResponse("/ai-queue/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


@gate.form(missing=_signed_out)
async def logout(request: Request, session: Session, form: dict[str, str]) -> Response:
    return await _signed_out(request)


def _https(request: Request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "")
    return request.url.scheme == "https" or forwarded.split(",")[0].strip() == "https"


ROUTES = [
    Route("/ai-queue/login", login_page, methods=["GET"]),
    Route("/ai-queue/login", login, methods=["POST"]),
    Route("/ai-queue/logout", logout, methods=["POST"]),
]
