"""The API's answers as typed dicts, named as in the OpenAPI description's components.

Only the fields a host app reads are spelled out; tests/unit/test_client_types.py
checks every one against /api/marking/openapi.json, so they cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

Status = Literal["pending", "processing", "completed", "failed", "cancelled", "expired"]
Review = Literal["unreviewed", "accepted", "reverted"]
Lane = Literal["live", "batch"]


class EnqueueAccepted(TypedDict):
    enqueued: int
    skipped: int
    already_marked: int
    queue_ids: list[str]
    # Rows that will copy the mark of a row with the same answer.
    same_answers: NotRequired[int]
    # The run the rows joined (the one marking.run_finished reports); absent if none was added.
    run_id: NotRequired[str | None]


SpendCap = Literal["group_usd_per_hour", "group_usd_per_day", "pool_usd_per_day"]


class EnqueueEstimate(TypedDict):
    """A dry run's answer: nothing was written."""

    rows: int
    already_marked: int
    estimated_tokens: int
    estimated_cost_usd: float | None
    eta_seconds: float | None
    # The spend caps the run would reach, with their values; None when none would.
    capped: dict[SpendCap, float] | None
    # Rows that would copy a mark of the same answer (`rows` counts only the marked).
    same_answers: NotRequired[int]
    # With `calibrate`: the rows marked first and the rest, each priced on its own.
    calibration: NotRequired[EstimatePart | None]
    rest: NotRequired[EstimatePart | None]


class EstimatePart(TypedDict):
    rows: int
    estimated_tokens: int
    estimated_cost_usd: float | None


class ProgressItem(TypedDict, total=False):
    current: float | None
    total: float | None
    message: str | None


class SubmissionStatus(TypedDict):
    status: Status
    attempts: int
    queue_position: int | None
    estimated_wait_seconds: float | None
    queue_id: NotRequired[str]
    review: NotRequired[Review | None]
    progress: NotRequired[ProgressItem | None]
    # Paused at a spend cap ("spend_cap", and when it goes on by itself), held until its
    # run's calibration is released ("calibration"), or waiting for the row with the same
    # answer ("same_answer").
    waiting_for: NotRequired[Literal["spend_cap", "calibration", "same_answer"] | None]
    resumes_at: NotRequired[str | None]
    paused_by: NotRequired[SpendCap | None]
    scheduled_for: NotRequired[str | None]
    # The overnight lane: "batch" rows are marked by `deadline` at batch prices.
    lane: NotRequired[Lane]
    deadline: NotRequired[str | None]
    # Waiting for the row with the same answer, whose mark it will copy.
    same_answer_as: NotRequired[str | None]


class RunProgress(TypedDict):
    total: int
    pending: int
    processing: int
    completed: int
    failed: int
    cancelled: int
    estimated_remaining_seconds: float | None
    tokens: int
    cost_usd: float | None
    waiting_for: NotRequired[Literal["spend_cap"] | None]
    resumes_at: NotRequired[str | None]
    paused_by: NotRequired[SpendCap | None]
    expired: NotRequired[int]
    scheduled: NotRequired[int]
    scheduled_for: NotRequired[str | None]
    # Unfinished rows on the overnight lane, and the latest of their deadlines.
    lane: NotRequired[Lane]
    batch: NotRequired[int]
    deadline: NotRequired[str | None]


class Accepted(TypedDict):
    queue_id: str
    review: Literal["accepted"]
    accepted_at: str


class Reverted(TypedDict):
    queue_id: str
    review: Literal["reverted"]
    reverted_at: str


class RunAccepted(TypedDict):
    accepted: int


class RunReverted(TypedDict):
    reverted: int
    superseded: int


class CancelAnswer(TypedDict):
    cancelled: int


class UsageTotal(TypedDict):
    jobs: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    unpriced_jobs: int
    avg_processing_seconds: float | None
    p95_processing_seconds: float | None
    # The provider's prompt cache: input tokens read and written, and what it saved.
    cache_read_tokens: NotRequired[int]
    cache_write_tokens: NotRequired[int]
    cache_saved_tokens: NotRequired[int]
    cache_saved_usd: NotRequired[float | None]


class UsageLine(UsageTotal):
    key: str


class UsageReport(TypedDict):
    items: list[UsageLine]
    total: UsageTotal


class AppliedResult(TypedDict):
    queue_id: str
    applied_at: str
    result: dict[str, Any]
    review: Review
    accepted_at: str | None
    reverted_at: str | None
    actor: str | None
    # What it was marked under; false `applied`: made under an older payload, never applied.
    payload_version: NotRequired[str | None]
    applied: NotRequired[bool]


class ResultHistory(TypedDict):
    items: list[AppliedResult]


@dataclass(frozen=True)
class Enqueued:
    """An enqueue's answer, the key it was sent with, and whether the server replayed it."""

    answer: EnqueueAccepted
    idempotency_key: str
    replayed: bool


@dataclass(frozen=True)
class MarkingEvent:
    """One live event: a row's status change; `id` is where a stream resumes after it."""

    id: str
    queue_id: str
    submission_id: str
    status: Status
    result: dict[str, Any] | None = None
    review: str | None = None
    progress: ProgressItem | None = None
    # A pending row paused at a spend cap: "spend_cap", until when, which cap.
    waiting_for: str | None = None
    resumes_at: str | None = None
    paused_by: str | None = None


class Erased(TypedDict):
    """DELETE /api/marking/submissions/{id}: rows removed (or marks cleared) per table."""

    erased: dict[str, int]


class ReplayAnswer(TypedDict):
    matched: int
    replayed: int
    dry_run: NotRequired[bool]
    would_replay: NotRequired[int]


class CriterionAgreement(TypedDict):
    id: str
    reviewed: int
    exact: float


class AgreementReport(TypedDict):
    """Agreement between the AI's scores and the teacher's reviews."""

    reviewed: int
    reverted: int
    exact: float | None
    adjacent: float | None
    mean_abs_error: float | None
    qwk: float | None
    criteria: list[CriterionAgreement]
    disagreements: list[str]


class RemarkAccepted(TypedDict):
    """A re-mark that went in (202)."""

    run_id: str | None
    enqueued: int
    unchanged: int
    reviewed_kept: int
    same_answers: int
    superseded: int


class RemarkEstimate(TypedDict):
    """A re-mark's dry run: its counts and the estimate; nothing was enqueued."""

    enqueued: int
    unchanged: int
    reviewed_kept: int
    same_answers: int
    rows: int
    already_marked: NotRequired[int]
    estimated_tokens: int
    estimated_cost_usd: float | None
    eta_seconds: float | None
    capped: dict[str, float] | None
    lane: str


class HeldRow(TypedDict):
    """A held result: why the marker held it for a teacher and its best guess."""

    queue_id: str
    submission_id: str
    reason: str  # clarification | suspected_injection | low_confidence
    best_guess: float | None
    max_score: float | None
    held_at: str
    question_id: str | None


class AskedQuestion(TypedDict):
    """A marker's question, once per payload, with the held rows that asked it."""

    question_id: str
    question: str
    payload_version: str | None
    rows: list[str]
    answered: bool


class HeldResults(TypedDict):
    """The assignment's held results waiting for a teacher (the "Needs you" list)."""

    assignment_id: str
    count: int
    items: list[HeldRow]
    questions: list[AskedQuestion]


class Clarified(TypedDict):
    """A teacher's answer recorded (202): the new payload and what was marked again."""

    question_id: str
    payload_version: str
    run_id: str | None
    remarked: int
    moved: int
    answered_at: str


class Released(TypedDict):
    run_id: str
    released: int
    released_at: NotRequired[str | None]


class CanaryYardstick(TypedDict):
    exact: NotRequired[float | None]
    qwk: NotRequired[float | None]


class CanaryRun(TypedDict):
    """A drift canary run: what started it, what it found against the teachers' scores."""

    run_id: str
    kind: str
    time: str
    trigger: Literal["schedule", "model_change", "manual"]
    state: Literal["running", "finished", "skipped"]
    lane: Literal["live", "batch"]
    model: str | None
    function_version: NotRequired[str | None]
    rows: int
    answered: int
    exact: float | None
    qwk: float | None
    cost: float | None
    passed: bool | None
    skipped: str | None
    yardstick: NotRequired[CanaryYardstick | None]
    finished_at: NotRequired[str | None]
    accepted_at: NotRequired[str | None]


class CanaryRuns(TypedDict):
    items: list[CanaryRun]
class RowAttempt(TypedDict):
    """One line of a row's history: a dispatch or an operator's action (no content)."""

    at: str
    kind: Literal["dispatch", "action"]
    outcome: str | None
    error: str | None
    duration_seconds: float | None
    ran_as: NotRequired[str | None]


class RowResultStatus(TypedDict):
    review: Review
    applied_at: str
    superseded: bool
    model: str | None
    payload_version: NotRequired[str | None]


class RowDetail(TypedDict):
    """GET /api/marking/rows/{queue_id}: the row as the queue list shows it, its history
    and its result's status."""

    queue_id: str
    submission_id: str
    assignment_id: str
    group: str
    status: Status
    attempts: int
    last_error: str | None
    created_at: str
    updated_at: str
    kind: NotRequired[str]
    pool: NotRequired[str]
    history: list[RowAttempt]
    result: NotRequired[RowResultStatus | None]
    # The row's payload: the hex sha256 the queue stores it under (None: the empty payload).
    payload_version: NotRequired[str | None]
