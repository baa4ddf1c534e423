"""The answers of the queue's routes: each shape once, as a type.

A field without a default is required in the OpenAPI description; one with a
default is optional there and is sent only when the code sets it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from aiqueue import models
from aiqueue.settings.kinds import Lane
from aiqueue.wire.base import Wire
from aiqueue.wire.fields import (
    PAYLOAD_VERSION,
    Count,
    KindName,
    Review,
    RowStatus,
    Seconds,
    SpendCap,
    Time,
    Usd,
    Uuid,
    WaitingFor,
    described,
)


class EnqueueAccepted(Wire):
    enqueued: Count
    skipped: Count
    already_marked: Count
    queue_ids: list[Uuid]
    same_answers: Count = described(
        "rows that will copy the mark of a row with the same answer", default=0)
    run_id: Uuid | None = described(
        "the run its rows joined (the one marking.run_finished reports); absent when no row "
        "was added", default=None)


class SpendCaps(Wire):
    group_usd_per_hour: Usd = 0
    group_usd_per_day: Usd = 0
    pool_usd_per_day: Usd = 0


class EnqueueEstimate(Wire):
    """A dry run of the enqueue: what it would add and use; nothing was written."""

    rows: Count = described("the answers that will be marked (copies of a mark excluded)")
    already_marked: Count
    estimated_tokens: Count
    estimated_cost_usd: Usd | None
    eta_seconds: Seconds
    same_answers: Count = described(
        "rows that would copy the mark of a row with the same answer", default=0)
    capped: SpendCaps | None = described(
        "the spend caps this run would reach, with their values; null when none would")
    calibration: EstimatePart | None = described(
        "with `calibrate`: the rows marked first", default=None)
    rest: EstimatePart | None = described(
        "with `calibrate`: the rows held until the release", default=None)


class EstimatePart(Wire):
    """A part of a dry run's rows, priced on its own."""

    rows: Count
    estimated_tokens: Count
    estimated_cost_usd: Usd | None


class ProcessStep(Wire):
    claimed: Uuid | None
    dispatched: bool
    recovered: Count
    pruned: Count
    chained: bool


class WebhookReceipt(Wire):
    accepted: Count
    ignored: Count
    rejected: Count


class QueueRow(Wire):
    queue_id: Uuid
    submission_id: Uuid
    assignment_id: str
    group: str
    status: RowStatus
    attempts: Count
    last_error: str | None
    created_at: Time
    updated_at: Time
    kind: KindName = "mark"
    pool: KindName = "default"
    # A pending row paused at a spend cap: why, until when, and which cap; or held
    # for its run's calibration.
    waiting_for: WaitingFor | None = None
    resumes_at: Time | None = None
    paused_by: SpendCap | None = None
    not_before: Time | None = described("not due before", default=None)
    expires_at: Time | None = described("expires if not dispatched by then", default=None)
    lane: Lane = described("the lane it is marked on: live, or the overnight batch lane",
                           default="live")
    deadline: Time | None = described("on the batch lane: marked by then", default=None)
    same_answer_as: Uuid | None = described(
        "the queue_id of the row with the same answer whose mark this row copies",
        default=None)

    @classmethod
    def of(cls, row: models.QueueRow) -> QueueRow:
        """A stored row as the queue list shows it."""
        return cls(
            queue_id=row.queue_id, submission_id=row.submission_id,
            assignment_id=row.assignment_id, group=row.group_key, kind=row.kind,
            pool=row.pool, status=row.status, attempts=row.attempts,
            last_error=row.last_error, created_at=row.created_at, updated_at=row.updated_at,
            waiting_for=row.waiting_for, resumes_at=row.resumes_at,
            not_before=row.not_before, expires_at=row.expires_at, lane=row.lane,
            deadline=row.deadline if row.lane == "batch" else None,
            same_answer_as=row.same_answer_as)


class RowAttempt(Wire):
    """One line of a row's history: a dispatch or an operator's action, without content."""

    at: Time = described("when the dispatch or action started")
    kind: Literal["dispatch", "action"]
    outcome: str | None = described("how it ended (null: still out)")
    error: str | None = described("the content-free error code")
    duration_seconds: Seconds = described("null while still out, or for an action")
    ran_as: KindName | None = described(
        "the kind whose function ran it, when not the row's own (a fallback)", default=None)


class RowResultStatus(Wire):
    """A row's applied result, by status only (never its content)."""

    review: Review
    applied_at: Time
    superseded: bool = described("a later result of the same submission was applied")
    model: str | None = described("the model that marked it, as the function reported it")
    payload_version: str | None = described(PAYLOAD_VERSION, default=None)


class RowDetail(QueueRow):
    """One row as the queue list shows it, its history and its result's status."""

    history: list[RowAttempt]
    result: RowResultStatus | None = described("null until a result was applied")
    payload_version: str | None = described(f"the row's payload: {PAYLOAD_VERSION}",
                                            default=None)

    @classmethod
    def of_parts(cls, row: models.QueueRow, history: list[models.Attempt],
                 result: models.RowResult | None, version: str | None = None) -> RowDetail:
        """A stored row, its attempts and its result's status, as the API answers it."""
        lines = [RowAttempt(
            at=a.started_at, kind=a.kind, outcome=a.outcome, error=a.error,
            duration_seconds=None if a.ended_at is None or a.kind == "action"
            else max(0.0, (a.ended_at - a.started_at).total_seconds()),
            **({"ran_as": a.ran_kind} if a.ran_kind else {}))
            for a in history]
        status = None if result is None else RowResultStatus(
            review=result.review, applied_at=result.applied_at,
            superseded=result.superseded, model=result.model,
            payload_version=result.payload_version)
        return cls(**dict(QueueRow.of(row)), history=lines, result=status,
                   payload_version=version)


class QueuePage(Wire):
    items: list[QueueRow]
    total: Count


class RetryAnswer(Wire):
    queue_id: Uuid
    status: Literal["pending"]


class ProgressItem(Wire):
    current: float | None = None
    total: float | None = None
    message: str | None = None


class SubmissionStatus(Wire):
    status: RowStatus
    attempts: Count
    queue_position: Count | None
    estimated_wait_seconds: Seconds
    queue_id: Uuid | None = None
    review: Review | None = None
    progress: ProgressItem | None = None
    waiting_for: WaitingFor | None = None
    resumes_at: Time | None = None
    paused_by: SpendCap | None = None
    scheduled_for: Time | None = described("pending, not due before then", default=None)
    lane: Lane = described("the lane its row is marked on", default="live")
    deadline: Time | None = described("on the batch lane: marked by then", default=None)
    same_answer_as: Uuid | None = described(
        "pending, and will copy the mark of this queue row (the same answer)",
        default=None)


class ReviewCounts(Wire):
    accepted: Count
    reverted: Count
    unreviewed: Count


class RunProgress(Wire):
    total: Count
    pending: Count
    processing: Count
    completed: Count
    failed: Count
    cancelled: Count
    estimated_remaining_seconds: Seconds
    tokens: Count
    cost_usd: Usd | None
    run_id: Uuid | None = None
    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    unpriced_jobs: Count = 0
    review: ReviewCounts | None = None
    waiting_for: WaitingFor | None = None
    resumes_at: Time | None = None
    paused_by: SpendCap | None = None
    expired: Count = 0
    scheduled: Count = 0
    scheduled_for: Time | None = None
    lane: Lane = described('"batch" while unfinished rows are on the batch lane',
                           default="live")
    batch: Count = described("unfinished rows on the batch lane", default=0)
    deadline: Time | None = described("the latest deadline of those rows", default=None)


class CancelAnswer(Wire):
    cancelled: Count


class Erased(Wire):
    erased: dict[str, Count] = Field(description=(
        "rows removed (or marks cleared) per table; all zero for an id the queue never saw"))


class ReplayAnswer(Wire):
    """matched: failed rows that match; replayed: moved to pending (0 on a dry run, which
    also says would_replay)"""

    matched: Count
    replayed: Count
    dry_run: Literal[True] = True
    would_replay: Count = 0
