"""Vercel's OIDC token as each request brings it (`x-vercel-oidc-token`).

With AWS_ROLE_ARN the dispatches a request's process step sends are signed with
credentials assumed with this token (dispatch/aws.py). Every app that may run on
Vercel reads it: the per-function apps, and `serve` and `dev`, which stand in for them.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from aiqueue.dispatch.aws import OidcToken
from aiqueue.web.state import AppState

_OIDC_HEADER = b"x-vercel-oidc-token"


class OidcHeader:
    """Offer the token a request carries to the app's OidcToken, which keeps the freshest."""

    def __init__(self, app: ASGIApp, oidc: OidcToken) -> None:
        self.app, self.oidc = app, oidc

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, value in scope.get("headers", ()):
                if name == _OIDC_HEADER:
                    self.oidc.seen(value.decode("latin-1").strip())
                    break
        await self.app(scope, receive, send)


def read_oidc_header(app: Starlette) -> Starlette:
    """`app` (from web.app.create_app), reading each request's OIDC header."""
    state: AppState = app.state.aiqueue
    app.add_middleware(OidcHeader, oidc=state.oidc)
    return app
