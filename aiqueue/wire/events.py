"""What the app sends on its own: live events and notifications."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from aiqueue.wire.answers import ProgressItem
from aiqueue.wire.base import Wire
from aiqueue.wire.fields import (
    PAYLOAD_VERSION,
    AlertName,
    AnyObject,
    Count,
    RowStatus,
    SpendCap,
    Time,
    Usd,
    Uuid,
    WaitingFor,
    described,
)


class MarkingEvent(Wire):
    """The `data:` of one `event: marking` on the live stream; its `id:` is the cursor to
    resume from (Last-Event-ID)."""

    queue_id: Uuid
    submission_id: Uuid
    status: RowStatus
    result: AnyObject = Field(default={}, description="completed: the result's summary fields")
    review: str = ""
    progress: ProgressItem | None = None
    # pending: the row's group reached a spend cap.
    waiting_for: WaitingFor | None = None
    resumes_at: Time | None = None
    paused_by: SpendCap | None = None


class SseEvent(Wire):
    """One event of the stream (in OpenAPI 3.1 an event stream's schema describes each event)."""

    event: Literal["marking"] = "marking"
    id: str = Field(default="", description="the cursor to resume from (Last-Event-ID)")
    data: str = Field(default="", json_schema_extra={
        "contentMediaType": "application/json",
        "contentSchema": {"$ref": "#/components/schemas/MarkingEvent"}})
    retry: int = Field(default=0, ge=0)


class RunFinished(Wire):
    """An assignment's run has no pending or processing rows left."""

    type: Literal["marking.run_finished"]
    assignment_id: str
    completed: Count
    failed: Count
    cancelled: Count
    expired: Count
    tokens: Count
    cost_usd: Usd | None
    started_at: Time
    finished_at: Time
    run_id: Uuid | None = Field(default=None, description=(
        "the run (an assignment may be marked again)"))
    remark: bool | None = Field(default=None, description="true: a re-mark's run")
    changed: Count | None = Field(default=None, description=(
        "a re-mark's run: the submissions whose score it changed"))


class RowFailed(Wire):
    """A row ended failed; `error` is a content-free code."""

    type: Literal["marking.row_failed"]
    queue_id: Uuid
    submission_id: Uuid
    assignment_id: str
    error: str | None
    payload_version: str | None = Field(default=None, description=PAYLOAD_VERSION)


class RowExpired(Wire):
    """A row was not dispatched by its expires_at and ended expired."""

    type: Literal["marking.row_expired"]
    queue_id: Uuid
    submission_id: Uuid
    assignment_id: str
    error: str | None
    payload_version: str | None = Field(default=None, description=PAYLOAD_VERSION)


class _Alert(Wire):
    alert: AlertName
    pool: str
    kind: str | None
    value: float
    threshold: float
    opened_at: Time


class Yardstick(Wire):
    """The canary a drift was measured against: the last passing (or accepted) one."""

    run_id: Uuid | None = None
    exact: float | None = None
    qwk: float | None = None


class AlertOpened(_Alert):
    """An alert's condition began (one per incident).  A `drift` (docs/canaries.md) adds
    the canary's model, function version, figures and the yardstick's."""

    type: Literal["marking.alert_opened"]
    model: str | None = None
    function_version: str | None = None
    canary_run_id: Uuid | None = None
    exact: float | None = None
    qwk: float | None = None
    yardstick: Yardstick | None = None


class AlertResolved(_Alert):
    """The incident's condition ended; `value` is the figure at that moment."""

    type: Literal["marking.alert_resolved"]
    resolved_at: Time | None = None


class CalibrationReady(Wire):
    """A run's calibration rows have all ended: the teacher can check them."""

    type: Literal["marking.calibration_ready"]
    assignment_id: str
    run_id: Uuid
    calibration_rows: Count
    completed: Count
    failed: Count
    cancelled: Count
    expired: Count
    held: Count = Field(description="rows still waiting for the release")
    ready_at: Time
class BudgetWarning(Wire):
    """A window's spend passed 80 % (then 95 %) of a spend cap: once per cap, group,
    window and threshold."""

    type: Literal["marking.budget_warning"]
    cap: SpendCap
    pool: str
    group: str | None = described("null for the pool's own daily cap")
    threshold: float = described("0.8, then 0.95")
    spent_usd: Usd
    limit_usd: Usd
    window_ends_at: Time
