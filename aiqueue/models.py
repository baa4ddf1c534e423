"""Typed rows that leave the store (queue, events, status, progress, teacher page).

Nothing above the store sees a driver record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NewType
from uuid import UUID

QueueId = NewType("QueueId", UUID)
SubmissionId = NewType("SubmissionId", UUID)
Status = Literal["pending", "processing", "completed", "failed", "cancelled"]
# (created_at, queue_id) of a row: where a page of the operator's table starts or ends.
PageCursor = tuple[datetime, UUID]
STATUSES: tuple[Status, ...] = ("pending", "processing", "completed", "failed", "cancelled")
Row = Mapping[str, Any]


@dataclass(frozen=True)
class Job:
    """A row just claimed for dispatch, with what the function needs."""

    queue_id: QueueId
    submission_id: SubmissionId
    assignment_id: str
    attempt: int
    dispatch_seq: int
    payload: dict[str, Any]
    content: str
    # Another row could be claimed right now (the claimer chains on it).
    more: bool = False
    # The breaker has failures on record: an accepted dispatch must reset them.
    breaker_dirty: bool = False

    @classmethod
    def from_row(cls, row: Row) -> Job:
        return cls(
            queue_id=QueueId(row["queue_id"]),
            submission_id=SubmissionId(row["submission_id"]),
            assignment_id=row["assignment_id"],
            attempt=row["attempts"],
            dispatch_seq=row["dispatch_seq"],
            payload=json.loads(row["payload"]),
            content=row["content"],
            more=bool(row["more"]),
            breaker_dirty=bool(row["breaker_dirty"]),
        )


@dataclass(frozen=True)
class QueueRow:
    """One row of ai_marking_queue as the API and the page show it."""

    queue_id: QueueId
    submission_id: SubmissionId
    assignment_id: str
    status: Status
    attempts: int
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    priority: int
    group_key: str

    @classmethod
    def from_row(cls, row: Row) -> QueueRow:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})

    def to_json(self) -> dict[str, Any]:
        """The contract's item shape for /api/marking/queue."""
        return {
            "queue_id": str(self.queue_id),
            "submission_id": str(self.submission_id),
            "assignment_id": self.assignment_id,
            "group": self.group_key,
            "status": self.status,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


@dataclass(frozen=True)
class Attempt:
    """One entry of a row's history: a dispatch or an operator action."""

    id: int
    dispatch_seq: int
    attempt: int
    kind: Literal["dispatch", "action"]
    started_at: datetime
    ended_at: datetime | None
    outcome: str | None
    error: str | None
    usage: dict[str, Any] | None
    actor: str | None
    # The platform's id for the invocation (DigitalOcean activation, Lambda request).
    dispatch_ref: str | None = None

    @classmethod
    def from_row(cls, row: Row) -> Attempt:
        fields = {name: row[name] for name in cls.__dataclass_fields__}
        fields["usage"] = json.loads(row["usage"]) if row["usage"] else None
        return cls(**fields)


@dataclass(frozen=True)
class Stats:
    """The queue's headline numbers."""

    pending: int
    processing: int
    completed: int
    failed: int
    cancelled: int
    failed_today: int
    completed_today: int
    avg_processing_seconds: float | None
    p95_processing_seconds: float | None
    oldest_pending_seconds: float | None

    @classmethod
    def from_row(cls, row: Row) -> Stats:
        return cls(
            pending=row["pending"],
            processing=row["processing"],
            completed=row["completed"],
            failed=row["failed"],
            cancelled=row["cancelled"],
            failed_today=row["failed_today"],
            completed_today=row["completed_today"],
            avg_processing_seconds=row["avg_seconds"],
            p95_processing_seconds=row["p95_seconds"],
            oldest_pending_seconds=row["oldest_pending_seconds"],
        )


@dataclass(frozen=True)
class Control:
    """Shared dispatch state: pause switch, circuit breaker, busy back-off."""

    paused: bool
    paused_by: str | None
    paused_at: datetime | None
    consecutive_failures: int
    circuit_open_until: datetime | None
    busy_until: datetime | None
    # "open" (cooling down), "half_open" (a probe may go) or "closed": aiqueue_circuit_state()
    circuit_state: str

    @property
    def circuit_open(self) -> bool:
        return self.circuit_state == "open"

    @classmethod
    def from_row(cls, row: Row) -> Control:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class EnqueueOutcome:
    """What one enqueue did; `replayed` is the remembered answer to a repeated key."""

    queue_ids: list[QueueId]
    unknown_ids: list[SubmissionId]
    already_marked: int = 0
    replayed: dict[str, Any] | None = None
    # The Idempotency-Key was first used with a different body.
    key_reused: bool = False

    def answer(self, requested: int) -> dict[str, Any]:
        """The contract's 202 body for a request of `requested` ids."""
        return {
            "enqueued": len(self.queue_ids),
            "skipped": requested - len(self.queue_ids) - self.already_marked,
            "already_marked": self.already_marked,
            "queue_ids": [str(q) for q in self.queue_ids],
        }

_CURSOR = re.compile(r"^(\d{1,20})-(\d{1,20})$")


@dataclass(frozen=True, order=True)
class EventCursor:
    """A position in the change feed: (transaction id, event id), see sql/live.sql."""

    tx: int
    id: int

    @classmethod
    def parse(cls, text: str) -> EventCursor | None:
        """The cursor an SSE `id:` line carried, or None if it is not one of ours."""
        match = _CURSOR.match(text.strip())
        return cls(int(match[1]), int(match[2])) if match else None

    def __str__(self) -> str:
        return f"{self.tx}-{self.id}"


@dataclass(frozen=True)
class MarkingEvent:
    """One status change of one queue row."""

    cursor: EventCursor
    queue_id: QueueId
    submission_id: SubmissionId
    status: Status
    summary: dict[str, Any] | None

    @classmethod
    def from_row(cls, row: Row) -> MarkingEvent:
        return cls(
            cursor=EventCursor(int(row["tx"]), int(row["id"])),
            queue_id=QueueId(row["queue_id"]),
            submission_id=SubmissionId(row["submission_id"]),
            status=row["status"],
            summary=json.loads(row["summary"]) if row["summary"] else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The `data:` of one SSE `marking` event."""
        data: dict[str, Any] = {
            "queue_id": str(self.queue_id),
            "submission_id": str(self.submission_id),
            "status": self.status,
        }
        summary = dict(self.summary or {})
        if self.status == "processing" and "progress" in summary:
            data["progress"] = summary["progress"]  # a progress item (heartbeat)
        elif self.status == "completed" and self.summary is not None:
            if "review" in summary:
                data["review"] = summary.pop("review")  # an accept or revert
            data["result"] = summary
        return data


@dataclass(frozen=True)
class EventBatch:
    """Events safe to hand out, and whether newer ones are waiting on older transactions."""

    events: list[MarkingEvent]
    held_back: bool
    full: bool


@dataclass(frozen=True)
class SubmissionStatus:
    """A submission's latest queue row, with what its queue position needs."""

    queue_id: QueueId
    status: Status
    attempts: int
    ahead: int | None
    running_seconds: float | None
    in_flight: int
    review: str | None = None
    # The last progress item of a processing row.
    progress: dict[str, Any] | None = None

    @classmethod
    def from_row(cls, row: Row) -> SubmissionStatus:
        fields = {name: row[name] for name in cls.__dataclass_fields__}
        fields["progress"] = json.loads(row["progress"]) if row["progress"] else None
        return cls(**fields)


@dataclass(frozen=True)
class RunProgress:
    """Counts over the rows of an assignment's latest marking run."""

    run_id: Any
    total: int
    pending: int
    processing: int
    completed: int
    failed: int
    cancelled: int
    # Queue position of the run's last pending row (rows of other runs included).
    last_position: int | None
    youngest_running_seconds: float | None
    in_flight: int
    # Usage of the run's applied results.
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    unpriced_jobs: int = 0
    # Review states of the run's applied results.
    accepted: int = 0
    reverted: int = 0
    unreviewed: int = 0

    @classmethod
    def from_row(cls, row: Row) -> RunProgress:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})

    @property
    def finished(self) -> int:
        return self.completed + self.failed + self.cancelled


@dataclass(frozen=True)
class AssignmentInfo:
    """What the teacher page knows of an assignment: a title and the marking payload."""

    assignment_id: str
    title: str
    payload: dict[str, Any]

    @classmethod
    def from_row(cls, row: Row) -> AssignmentInfo:
        return cls(row["assignment_id"], row["title"], json.loads(row["payload"]))


@dataclass(frozen=True)
class SubmissionResult:
    """One row of the teacher's table: the answer, its AI mark and its queue state."""

    submission_id: SubmissionId
    student_name: str | None
    content: str
    ai_result: dict[str, Any] | None
    ai_marked_at: datetime | None
    queue_status: Status | None
    # The last progress item while the latest row is processing.
    progress: dict[str, Any] | None = None
    # The applied result the mark shows, and its review.
    result_queue_id: QueueId | None = None
    review: str | None = None
    adjusted_result: dict[str, Any] | None = None

    @classmethod
    def from_row(cls, row: Row) -> SubmissionResult:
        def loads(name: str) -> Any:
            return json.loads(row[name]) if row[name] else None
        return cls(
            submission_id=SubmissionId(row["id"]),
            student_name=row["student_name"],
            content=row["content"],
            ai_result=loads("ai_result"),
            ai_marked_at=row["ai_marked_at"],
            queue_status=row["queue_status"],
            progress=loads("progress"),
            result_queue_id=row["result_queue_id"],
            review=row["review"],
            adjusted_result=loads("adjusted_result"),
        )


Review = Literal["unreviewed", "accepted", "reverted"]


@dataclass(frozen=True)
class ReviewOutcome:
    """What one accept or revert did: accepted/reverted/superseded/not_completed/not_found."""

    outcome: str
    at: datetime | None

    @classmethod
    def from_row(cls, row: Row) -> ReviewOutcome:
        return cls(row["outcome"], row["at"])


@dataclass(frozen=True)
class AppliedResult:
    """One applied result of a submission and its review."""

    queue_id: QueueId
    applied_at: datetime
    result: dict[str, Any]
    review: Review
    accepted_at: datetime | None
    reverted_at: datetime | None
    actor: str | None
    adjusted_result: dict[str, Any] | None

    @classmethod
    def from_row(cls, row: Row) -> AppliedResult:
        fields = {name: row[name] for name in cls.__dataclass_fields__}
        fields["result"] = json.loads(row["result"])
        fields["adjusted_result"] = (json.loads(row["adjusted_result"])
                                     if row["adjusted_result"] else None)
        return cls(**fields)

    def to_json(self) -> dict[str, Any]:
        """One item of /api/marking/submissions/<id>/results."""
        def iso(value: datetime | None) -> str | None:
            return value.isoformat() if value else None
        return {
            "queue_id": str(self.queue_id), "applied_at": iso(self.applied_at),
            "result": self.result, "review": self.review,
            "accepted_at": iso(self.accepted_at), "reverted_at": iso(self.reverted_at),
            "actor": self.actor, "adjusted_result": self.adjusted_result,
        }


@dataclass(frozen=True)
class UsageRow:
    """Usage of applied results under one key (None: the total)."""

    key: str | None
    jobs: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    unpriced_jobs: int
    avg_seconds: float | None
    p95_seconds: float | None

    @classmethod
    def from_row(cls, row: Row) -> UsageRow:
        fields = {name: row[name] for name in cls.__dataclass_fields__}
        fields["key"] = None if row["is_total"] else row["key"]
        return cls(**fields)


@dataclass(frozen=True)
class TallyRow:
    """Summed counter deltas for one (outcome, job, error, model, bucket)."""

    outcome: str
    job: str | None
    error: str | None
    model: str | None
    le: float | None
    n: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    seconds: float

    @classmethod
    def from_row(cls, row: Row) -> TallyRow:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})
