"""The queue's own rows: ids, statuses, jobs, attempts, stats, the control row.

What an enqueue answers (and its dry run) is in enqueue.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NewType
from uuid import UUID

from aiqueue.settings.kinds import Lane

QueueId = NewType("QueueId", UUID)
SubmissionId = NewType("SubmissionId", UUID)
Status = Literal["pending", "processing", "completed", "failed", "cancelled", "expired"]
# The dispatch breaker: "open" (cooling down), "half_open" (a probe may go) or "closed".
Circuit = Literal["open", "half_open", "closed"]
# (created_at, queue_id) of a row: where a page of the operator's table starts or ends.
PageCursor = tuple[datetime, UUID]
STATUSES: tuple[Status, ...] = (
    "pending", "processing", "completed", "failed", "cancelled", "expired")
Row = Mapping[str, Any]
# Why a pending row is not dispatched yet.
WaitingFor = Literal["spend_cap", "calibration", "same_answer"]


def payload_key(payload_text: str) -> str:
    """A payload's cache key (docs/prompt-cache.md): the sha256 of its JSON text as stored
    (ai_marking_payloads.sha256), in hex."""
    return hashlib.sha256(payload_text.encode()).hexdigest()


@dataclass(frozen=True)
class Completed:
    """A completed result of one dispatch, as the store applies it: the row, the
    dispatch, the result and the function's usage (priced by the store)."""

    queue_id: UUID
    dispatch_seq: int
    result: Mapping[str, Any]
    usage: Mapping[str, Any] | None = None

    def args(self) -> tuple[UUID, str, str | None, int]:
        """The complete statement's first four parameters."""
        usage = None if self.usage is None else json.dumps(self.usage)
        return self.queue_id, json.dumps(self.result), usage, self.dispatch_seq

    @staticmethod
    def items_json(items: Sequence[Completed]) -> str:
        """The settle statement's items: [{"queue_id", "dispatch_seq", "result", "usage"}]."""
        return json.dumps([{"queue_id": str(i.queue_id), "dispatch_seq": i.dispatch_seq,
                            "result": i.result, "usage": i.usage} for i in items])


@dataclass(frozen=True)
class Job:
    """A row just claimed for dispatch, with what the function needs."""

    queue_id: QueueId
    submission_id: SubmissionId
    assignment_id: str
    attempt: int
    dispatch_seq: int
    # The enqueue's payload as the database returns it (JSON text): it goes into
    # the dispatch as it is, never decoded and encoded again (dispatch_data).
    payload_json: str
    content: str
    # Another row could be claimed right now (the claimer chains on it).
    more: bool = False
    # The breaker has failures on record: an accepted dispatch must reset them.
    breaker_dirty: bool = False
    # Its kind (which function does it) and that kind's pool (docs/concepts.md).
    kind: str = "mark"
    pool: str = "default"
    # The provider's prompt cache key: the payload's hash, ":<n>" when sharded.
    cache_key: str = ""

    @classmethod
    def from_row(cls, row: Row) -> Job:
        return cls(
            queue_id=QueueId(row["queue_id"]),
            submission_id=SubmissionId(row["submission_id"]),
            assignment_id=row["assignment_id"],
            attempt=row["attempts"],
            dispatch_seq=row["dispatch_seq"],
            payload_json=row["payload"],
            content=row["content"],
            more=bool(row["more"]),
            breaker_dirty=bool(row["breaker_dirty"]),
            kind=row["kind"],
            pool=row["pool"],
            cache_key=payload_key(row["payload"]),
        )

    @property
    def payload(self) -> dict[str, Any]:
        """The payload as an object (the dispatch itself sends `payload_json`)."""
        value: dict[str, Any] = json.loads(self.payload_json)
        return value


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
    kind: str = "mark"
    pool: str = "default"
    # A pending row of a group at a spend cap (docs/concepts.md): when it goes on.
    resumes_at: datetime | None = None
    # docs/operating/alerts.md: not due before not_before; expired if not dispatched by expires_at.
    not_before: datetime | None = None
    expires_at: datetime | None = None
    # docs/overnight.md: the lane it is marked on, and (batch lane) its deadline.
    lane: Lane = "live"
    deadline: datetime | None = None
    # docs/same-answer.md: the row whose mark this one copies (the same answer), else None.
    same_answer_as: QueueId | None = None
    # docs/agreement.md: pending, held until its run's calibration is released.
    held: bool = False

    @classmethod
    def from_row(cls, row: Row) -> QueueRow:
        # `held` is read only where a page or answer says why a row waits.
        found = {name: row[name] for name in cls.__dataclass_fields__ if name != "held"}
        return cls(**found, held=bool(row.get("held", False)))

    @property
    def waiting_for(self) -> WaitingFor | None:
        """Why a pending row is not dispatched yet: "calibration", "spend_cap",
        "same_answer", or None."""
        if self.held:
            return "calibration"
        if self.resumes_at is not None:
            return "spend_cap"
        if self.status == "pending" and self.same_answer_as is not None:
            return "same_answer"
        return None

    def scheduled_for(self, now: datetime) -> datetime | None:
        """When a pending row still waiting for its not_before becomes due, else None."""
        if self.status == "pending" and self.not_before is not None and self.not_before > now:
            return self.not_before
        return None


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
    # What the platform said about it (docs/guarantees.md): still_running,
    # applied_from_activation, activation_failed, timed_out, lookup_failed.
    platform: str | None = None
    # The fallback kind whose function ran it; None: the row's own.
    ran_kind: str | None = None
    # An operator's note on the action (/ai-queue only, never the API or a notification).
    note: str | None = None

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
    # docs/operating/alerts.md: rows that expired, and pending rows not due before their not_before.
    expired: int = 0
    scheduled: int = 0

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
            expired=row["expired"],
            scheduled=row["scheduled"],
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
    circuit_state: Circuit

    @property
    def circuit_open(self) -> bool:
        return self.circuit_state == "open"

    @classmethod
    def from_row(cls, row: Row) -> Control:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Lookup:
    """A dispatch whose platform is to be asked how its invocation ended (docs/guarantees.md)."""

    queue_id: QueueId
    dispatch_seq: int
    attempt: int
    ref: str
    # The platform's time limit and grace have run out: "not found" now means gone.
    past_bound: bool

    @classmethod
    def from_row(cls, row: Row) -> Lookup:
        return cls(QueueId(row["queue_id"]), row["dispatch_seq"], row["attempt"],
                   row["dispatch_ref"], bool(row["past_bound"]))
