"""The notifications aiqueue sends, typed, and checking their signature (Standard Webhooks
v1) with the standard library only.

aiqueue signs every notification with QUEUE_NOTIFY_SECRET (`whsec_…`): HMAC-SHA256,
keyed by the secret's base64 bytes, over `<webhook-id>.<webhook-timestamp>.<body>`.
Each event is one of the typed dicts below, told apart by `type`; they carry ids, counts
and codes only (docs/integrating.md, "Notifications").  tests/unit/test_client_types.py
checks each against the OpenAPI description's `webhooks`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict

AlertName = Literal["backlog_age", "stalled", "failure_spike", "latency", "drift"]


class RunFinished(TypedDict):
    """An assignment's run has no pending or processing row left."""

    type: Literal["marking.run_finished"]
    assignment_id: str
    run_id: NotRequired[str | None]
    completed: int
    failed: int
    cancelled: int
    expired: int
    tokens: int
    cost_usd: float | None
    started_at: str
    finished_at: str
    # A re-mark's run (docs/remark.md): how many submissions' scores it changed.
    remark: NotRequired[bool]
    changed: NotRequired[int]


class RowFailed(TypedDict):
    """A row ended failed; `error` is a content-free code ("operator": failed by hand)."""

    type: Literal["marking.row_failed"]
    queue_id: str
    submission_id: str
    assignment_id: str
    error: str | None
    # The payload the row was marked under (docs/remark.md).
    payload_version: NotRequired[str | None]


class RowExpired(TypedDict):
    """A row was not dispatched by its expires_at; `error` is "expired"."""

    type: Literal["marking.row_expired"]
    queue_id: str
    submission_id: str
    assignment_id: str
    error: str | None
    # The payload the row was marked under (docs/remark.md).
    payload_version: NotRequired[str | None]


class DriftYardstick(TypedDict):
    """The canary a drift was measured against (docs/canaries.md)."""

    run_id: NotRequired[str | None]
    exact: NotRequired[float | None]
    qwk: NotRequired[float | None]


class AlertOpened(TypedDict):
    """An alert's incident began (docs/operating/alerts.md); a `drift` adds the canary's
    model, function version and figures, and the yardstick's."""

    type: Literal["marking.alert_opened"]
    alert: AlertName
    pool: str
    kind: str | None
    value: float
    threshold: float
    opened_at: str
    model: NotRequired[str | None]
    function_version: NotRequired[str | None]
    canary_run_id: NotRequired[str | None]
    exact: NotRequired[float | None]
    qwk: NotRequired[float | None]
    yardstick: NotRequired[DriftYardstick | None]


class AlertResolved(TypedDict):
    """The incident ended; `value` is the figure at that moment."""

    type: Literal["marking.alert_resolved"]
    alert: AlertName
    pool: str
    kind: str | None
    value: float
    threshold: float
    opened_at: str
    resolved_at: NotRequired[str | None]


class CalibrationReady(TypedDict):
    """A calibrated run's first rows have all ended: the teacher can check them."""

    type: Literal["marking.calibration_ready"]
    assignment_id: str
    run_id: str
    calibration_rows: int
    completed: int
    failed: int
    cancelled: int
    expired: int
    held: int
    ready_at: str


class BudgetWarning(TypedDict):
    """A window's spend passed 80 % (then 95 %) of a spend cap."""

    type: Literal["marking.budget_warning"]
    cap: Literal["group_usd_per_hour", "group_usd_per_day", "pool_usd_per_day"]
    pool: str
    group: str | None
    threshold: float
    spent_usd: float
    limit_usd: float
    window_ends_at: str


class ReviewNeeded(TypedDict):
    """A result is held for a teacher (docs/review-holds.md): ids and the reason, never the
    question's words (GET /api/marking/review_needed has them)."""

    type: Literal["marking.review_needed"]
    queue_id: str
    submission_id: str
    assignment_id: str
    reason: Literal["clarification", "suspected_injection", "low_confidence"]
    question_id: NotRequired[str | None]


# Every notification; `event["type"]` tells which (a type checker narrows on it).
Notification = (RunFinished | RowFailed | RowExpired | AlertOpened | AlertResolved
                | CalibrationReady | BudgetWarning | ReviewNeeded)

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
