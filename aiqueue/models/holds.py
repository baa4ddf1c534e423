"""Held results and the marker's questions, as the store gives them (docs/review-holds.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast
from uuid import UUID

from aiqueue.models.queue import Row

HoldReason = Literal["clarification", "suspected_injection", "low_confidence"]


@dataclass(frozen=True)
class Hold:
    """One held result waiting for a teacher (the question is content: the list's only)."""

    queue_id: UUID
    submission_id: UUID
    reason: HoldReason
    question_id: UUID | None
    question: str | None
    best_guess: float | None
    max_score: float | None
    held_at: datetime
    payload_version: str | None

    @classmethod
    def from_row(cls, row: Row) -> Hold:
        return cls(row["queue_id"], row["submission_id"], cast(HoldReason, row["reason"]),
                   row["question_id"], row["question"], row["best_guess"], row["max_score"],
                   row["held_at"], row["payload_version"])


@dataclass(frozen=True)
class AskedQuestion:
    """A question as its rows asked it: its words, the payload, answered, who to mark again."""

    question: str | None
    payload: dict[str, Any]
    answered: bool
    askers: tuple[UUID, ...]

    @classmethod
    def from_row(cls, row: Row) -> AskedQuestion:
        payload = json.loads(row["payload"]) if row["payload"] else {}
        return cls(row["question"], payload, bool(row["answered"]), tuple(row["askers"] or ()))


@dataclass(frozen=True)
class Answered:
    """What an answer did: when, the new payload's version, the waiting rows moved under
    it, the askers' rows enqueued again and the run they joined."""

    answered_at: datetime
    payload_version: str
    moved: int
    remarked: int
    run_id: UUID | None
