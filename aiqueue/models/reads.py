"""What pages and streams read: live events, status, run progress, the teacher page."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from aiqueue.models.queue import QueueId, Row, Status, SubmissionId
from aiqueue.settings.kinds import Lane

_CURSOR = re.compile(r"^(\d{1,20})-(\d{1,20})(?:-(\d{1,9}))?$")


@dataclass(frozen=True, order=True)
class EventCursor:
    """A position in the change feed: (transaction id, event id, place in a
    batch event), see sql/live.sql."""

    tx: int
    id: int
    # 1-based place of a row in an enqueue's batch event; 0 for a single-row event.
    k: int = 0

    @classmethod
    def parse(cls, text: str) -> EventCursor | None:
        """The cursor an SSE `id:` line carried, or None if it is not one of ours."""
        match = _CURSOR.match(text.strip())
        if not match:
            return None
        return cls(int(match[1]), int(match[2]), int(match[3] or 0))

    def __str__(self) -> str:
        return f"{self.tx}-{self.id}" if self.k == 0 else f"{self.tx}-{self.id}-{self.k}"


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
            cursor=EventCursor(int(row["tx"]), int(row["id"]), int(row["k"])),
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
        elif self.status == "pending" and "waiting_for" in summary:
            # Paused at a spend cap (docs/concepts.md): why, and until when.
            data.update({k: summary.get(k) for k in ("waiting_for", "resumes_at", "paused_by")})
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
    # A pending row paused at a spend cap (docs/concepts.md): until when, and which cap.
    resumes_at: datetime | None = None
    paused_by: str | None = None
    # A pending row's not_before while it is still to come (docs/operating/alerts.md).
    scheduled_for: datetime | None = None
    # docs/overnight.md: the lane it is marked on, and (batch lane) its deadline.
    lane: Lane = "live"
    deadline: datetime | None = None
    # A pending row that will copy this row's mark (the same answer, docs/same-answer.md).
    same_answer_as: UUID | None = None
    # Held for its run's calibration (docs/agreement.md).
    held: bool = False

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
    # The run's pending rows are paused at a spend cap until then (docs/concepts.md).
    resumes_at: datetime | None = None
    paused_by: str | None = None
    # docs/operating/alerts.md: rows that expired; pending rows not due yet, and when the first is.
    expired: int = 0
    scheduled: int = 0
    scheduled_for: datetime | None = None
    # docs/overnight.md: unfinished rows on the batch lane, and the latest of their deadlines.
    batch: int = 0
    deadline: datetime | None = None

    @classmethod
    def from_row(cls, row: Row) -> RunProgress:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})

    @property
    def finished(self) -> int:
        return self.completed + self.failed + self.cancelled + self.expired


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
    # Other submissions on the page with the same answer, marked once (docs/same-answer.md).
    same_answers: int = 0
    # Pending, held until the teacher releases its run's calibration (docs/agreement.md).
    held: bool = False
    # Why its latest row is not marked yet, and until when (None: no row).
    wait: RowWait | None = None
    # A re-mark (docs/remark.md): the mark it replaced, when that was made under another
    # payload; and whether the mark shown was made under another than the saved one.
    previous_result: dict[str, Any] | None = None
    older_rubric: bool = False

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
            same_answers=row["same_answers"],
            held=bool(row["held"]),
            wait=RowWait.from_row(row) if row["queue_status"] else None,
            previous_result=loads("previous_result"),
            older_rubric=bool(row["older_rubric"]),
        )


@dataclass(frozen=True)
class RowWait:
    """A submission's latest row as far as the teacher asks "why isn't it marked yet?":
    its own state and its pool's (docs/concepts.md)."""

    attempts: int
    kind: str
    last_error: str | None
    # When a row that failed or was refused is due again.
    run_after: datetime | None
    # A spend cap's pause ends; not_before; the batch lane's deadline.
    resumes_at: datetime | None
    not_before: datetime | None
    lane: str
    deadline: datetime | None
    # It copies a leader's mark (the same answer).
    copies_leader: bool
    # The pool's breaker is open until, and its model refused everything until.
    breaker_until: datetime | None
    busy_until: datetime | None

    @classmethod
    def from_row(cls, row: Row) -> RowWait:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})
