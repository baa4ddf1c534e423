"""The one gate in front of every protected route: a bearer secret (or, for the live
events, a page's events token), or an operator session, and for a form that changes
something, the session's CSRF token too (`form`).

It reads only the settings, the signed cookie or token and the form, and runs before a
handler builds the Runtime, so a request without credentials opens no database
connection and a forged form changes nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Literal

from starlette.requests import Request
from starlette.responses import Response

from aiqueue import wire
from aiqueue.errors import Unauthorized
from aiqueue.reads.live import TOKEN_MAX_AGE
from aiqueue.web.auth import Session, check_csrf, current_session, login_redirect, read_form
from aiqueue.web.http import read_json, require_bearer
from aiqueue.web.state import app_state

Handler = Callable[[Request], Awaitable[Response]]
SessionHandler = Callable[[Request, Session], Awaitable[Response]]
FormHandler = Callable[[Request, Session, dict[str, str]], Awaitable[Response]]
Also = Literal["cron", "metrics", "events"]


def bearer(*also: Also) -> Callable[[Handler], Handler]:
    """Require `Authorization: Bearer <MARKING_QUEUE_SECRET>`.

    `"cron"` also accepts CRON_SECRET on GET, `"metrics"` also METRICS_TOKEN, `"events"`
    also a page's events token (`events_token`).
    """
    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def gated(request: Request) -> Response:
            if "events" in also and events_token(request):
                return await handler(request)
            settings = app_state(request).settings
            accepted = list(settings.queue_secrets)
            if "cron" in also and request.method == "GET":
                accepted += settings.cron_secrets
            if "metrics" in also and settings.metrics_token:
                accepted.append(settings.metrics_token)
            require_bearer(request, *accepted)
            return await handler(request)
        return gated
    return decorate


# A body on a route that takes none is read up to this much before it is refused (413 above).
NO_BODY_LIMIT = 64 * 1024


def no_body(handler: Handler) -> Handler:
    """A route that takes no body (cancel, retry, revert, release, an assignment's accept):
    an empty body or `{}` passes, any field is a 422 naming the fields, before the handler
    runs, so nothing changes (docs/integrating.md).

    Put it under `bearer()`: credentials are checked first.
    """
    @functools.wraps(handler)
    async def gated(request: Request) -> Response:
        body = await read_json(request, NO_BODY_LIMIT, optional=True, empty=wire.NO_BODY)
        wire.no_fields(body)
        return await handler(request)
    gated.takes_no_body = True  # type: ignore[attr-defined]
    return gated


def events_token(request: Request) -> bool:
    """Whether a page's events token lets the request in: `?token=`, signed for the
    `?assignment_id=` it names (422 when that is malformed); a wrong one is 401.

    The app's own pages carry this short-lived token, bound to one assignment, so the
    queue secret never reaches a browser.  A request whose bearer is the queue secret
    is let in by that instead.
    """
    assignment_id = wire.parse_assignment_id(request.query_params.get("assignment_id"))
    token = request.query_params.get("token")
    if token is None or holds_bearer(request):
        return False
    if not app_state(request).tokens.verify_events(token, assignment_id, max_age=TOKEN_MAX_AGE):
        raise Unauthorized("the events token is wrong, expired or for another assignment")
    return True


def holds_bearer(request: Request) -> bool:
    """Whether the request carries MARKING_QUEUE_SECRET (for a route that also answers
    the public, less: /healthz)."""
    try:
        require_bearer(request, *app_state(request).settings.queue_secrets)
    except Unauthorized:
        return False
    return True


def session(missing: Handler | None = None) -> Callable[[SessionHandler], Handler]:
    """Require the operator's session; without one answer `missing` (default: to the login)."""
    def decorate(handler: SessionHandler) -> Handler:
        @functools.wraps(handler)
        async def gated(request: Request) -> Response:
            found = current_session(request)
            if found is None:
                return await (missing or _to_login)(request)
            return await handler(request, found)
        return gated
    return decorate


def form(missing: Handler | None = None,
         refused: Handler | None = None) -> Callable[[FormHandler], Handler]:
    """Require the session (else `missing`, as `session`) and the form's CSRF token.

    The handler gets the form as read. A missing or wrong token answers `refused`
    (default: 401) before the handler runs, so nothing changes.
    """
    def decorate(handler: FormHandler) -> Handler:
        @session(missing)
        @functools.wraps(handler)
        async def gated(request: Request, found: Session) -> Response:
            fields = await read_form(request)
            try:
                check_csrf(found, fields)
            except Unauthorized:
                if refused is None:
                    raise
                return await refused(request)
            return await handler(request, found, fields)
        return gated
    return decorate


async def _to_login(request: Request) -> Response:
    return login_redirect(request)


async def unauthorized(request: Request) -> Response:
    """For routes a page calls with fetch(): a JSON 401 instead of a redirect."""
    raise Unauthorized("sign in at /ai-queue/login first")
