"""Checking a notification's signature (Standard Webhooks v1), with the standard library only.

aiqueue signs every notification with QUEUE_NOTIFY_SECRET (`whsec_…`): HMAC-SHA256,
keyed by the secret's base64 bytes, over `<webhook-id>.<webhook-timestamp>.<body>`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

# A timestamp further off than this is refused, so a captured event can't be replayed.
TOLERANCE_SECONDS = 5 * 60


class BadSignature(Exception):
    """The notification's signature or timestamp does not check out: refuse it (401)."""


def verify_notification(secret: str, body: bytes | str, headers: Mapping[str, str], *,
                        now: float | None = None) -> dict[str, Any]:
    """The event a signed notification carries; BadSignature when it is not genuine."""
    lower = {k.lower(): v for k, v in headers.items()}
    msg_id, stamp = lower.get("webhook-id", ""), lower.get("webhook-timestamp", "")
    try:
        sent = int(stamp)
    except ValueError:
        raise BadSignature("no valid webhook-timestamp") from None
    if abs((time.time() if now is None else now) - sent) > TOLERANCE_SECONDS:
        raise BadSignature("the timestamp is too far off")
    text = body.decode() if isinstance(body, bytes) else body
    key = base64.b64decode(secret.removeprefix("whsec_"))
    expected = base64.b64encode(hmac.new(key, f"{msg_id}.{sent}.{text}".encode(),
                                         hashlib.sha256).digest()).decode()
    # The header may carry several space-separated `v1,<sig>` (a rotated secret).
    for part in lower.get("webhook-signature", "").split():
        version, _, signature = part.partition(",")
        if version == "v1" and hmac.compare_digest(signature, expected):
            event: dict[str, Any] = json.loads(text)
            return event
    raise BadSignature("no signature matches")
