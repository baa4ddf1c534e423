"""The notification outbox's rows: an event claimed for delivery, and one the panel lists."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NewType
from uuid import UUID

from aiqueue.models.queue import QueueId, Row

EventId = NewType("EventId", UUID)
EventType = Literal["marking.run_finished", "marking.row_failed", "marking.row_expired",
                    "marking.alert_opened", "marking.alert_resolved", "marking.budget_warning",
                    "marking.review_needed"]
DeliveryState = Literal["waiting", "delivered", "gave_up"]


@dataclass(frozen=True)
class Delivery:
    """An event claimed for one delivery attempt; `body` is the exact JSON text to send."""

    event_id: EventId
    type: EventType
    body: str
    attempt: int
    created_at: datetime

    @classmethod
    def from_row(cls, row: Row) -> Delivery:
        return cls(EventId(row["id"]), row["type"], row["body"], int(row["attempts"]),
                   row["created_at"])


@dataclass(frozen=True)
class OutboxEntry:
    """An event waiting or given up, for the operator's panel (ids and codes only)."""

    event_id: EventId
    type: EventType
    assignment_id: str
    queue_id: QueueId | None
    state: DeliveryState
    attempts: int
    created_at: datetime
    next_at: datetime
    last_outcome: str | None
    last_at: datetime | None
    # How many events are in this state (the panel lists only the newest).
    of_state: int

    @classmethod
    def from_row(cls, row: Row) -> OutboxEntry:
        return cls(
            event_id=EventId(row["id"]), type=row["type"], assignment_id=row["assignment_id"],
            queue_id=QueueId(row["queue_id"]) if row["queue_id"] else None,
            state=row["state"], attempts=int(row["attempts"]), created_at=row["created_at"],
            next_at=row["next_at"], last_outcome=row["last_outcome"], last_at=row["last_at"],
            of_state=int(row["of_state"]),
        )
