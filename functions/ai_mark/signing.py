"""Verifying a signed dispatch (Standard Webhooks v1) and refusing its replay.

With AI_MARKING_SIGNING_SECRET set, a dispatch must carry `webhook-id`,
`webhook-timestamp` and a `webhook-signature` that the secret verifies; a
timestamp more than 5 minutes off is refused (the `standardwebhooks` package's
tolerance), and so is a message accepted once already.  The queue gives every
dispatch an id of its own (`<queue_id>.<dispatch_seq>`, docs/deploying/index.md), so an id
seen again is a replay.  An id is remembered only once its dispatch was
accepted: a dispatch refused (bad input, busy) may come again, and ids are
kept for as long as their timestamp is within the tolerance, after which the
signature check refuses the message anyway.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from standardwebhooks.webhooks import Webhook

from .invoke import HttpError, check_bearer
from .settings import Settings

TOLERANCE_SECONDS = 5 * 60


class DispatchVerifier:
    """Checks each dispatch's signature and remembers what it accepted (per process)."""

    def __init__(self, secret: str) -> None:
        self.webhook = Webhook(secret)
        # webhook-id -> when it may be forgotten (monotonic).
        self.seen: dict[str, float] = {}

    def verify(self, body: bytes, headers: Mapping[str, str]) -> str:
        """The message's id when its signature and timestamp hold; else 401."""
        wanted = ("webhook-id", "webhook-timestamp", "webhook-signature")
        given = {name: headers.get(name, "") for name in wanted}
        try:
            self.webhook.verify(body, given, json_parse=False)
        except Exception:
            # Bad signature, stale or future timestamp, missing or garbled header,
            # a body that is not UTF-8: all the same refusal, without detail.
            raise HttpError(401, "bad_signature",
                            "the dispatch's webhook signature is missing, wrong or too old"
                            ) from None
        return given["webhook-id"]

    def accept_once(self, message: str, *, now: float | None = None) -> None:
        """Remember the accepted message's id; 409 if it was accepted before (a replay)."""
        now = time.monotonic() if now is None else now
        for key in [k for k, until in self.seen.items() if until <= now]:
            del self.seen[key]
        if message in self.seen:
            raise HttpError(409, "replayed", "this signed dispatch was accepted already")
        # Twice the tolerance: the timestamp may have been up to 5 minutes ahead.
        self.seen[message] = now + 2 * TOLERANCE_SECONDS


# One verifier per secret and process: a warm serverless instance keeps the ids
# it accepted, as the server does.
_VERIFIERS: dict[str, DispatchVerifier] = {}


def verifier_for(secret: str) -> DispatchVerifier:
    if secret not in _VERIFIERS:
        _VERIFIERS[secret] = DispatchVerifier(secret)
    return _VERIFIERS[secret]


def authenticate(headers: Mapping[str, str], raw: bytes | None, settings: Settings
                 ) -> str | None:
    """A web entry point's checks (docs/deploying/index.md): the bearer token, then the signature.

    The signed message's id (to `accept` once the dispatch is taken), else None.
    `raw`: the body exactly as sent (None when the platform parsed it: then no
    signature can be checked, and a signed deployment refuses).
    """
    check_bearer(headers, settings.function_token)
    if not settings.signing_secret:
        return None
    if raw is None:
        raise HttpError(401, "bad_signature",
                        "a signed dispatch needs the raw body (deploy the action with web: raw)")
    return verifier_for(settings.signing_secret).verify(raw, headers)


def accept(message: str | None, settings: Settings) -> None:
    """Remember an accepted signed dispatch; 409 when it was accepted before."""
    if message is not None and settings.signing_secret:
        verifier_for(settings.signing_secret).accept_once(message)
