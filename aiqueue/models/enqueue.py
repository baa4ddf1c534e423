"""What an enqueue did or would do: its outcomes, and its dry run's figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from aiqueue.models.queue import QueueId, Row, SubmissionId


@dataclass(frozen=True)
class Enqueued:
    """An enqueue that went in: the new rows, and how many were left out as marked."""

    queue_ids: list[QueueId]
    already_marked: int = 0
    # New rows that will copy the mark of a row with the same answer (docs/same-answer.md).
    same_answers: int = 0
    # The run the new rows joined (None: no row was added).
    run_id: UUID | None = None

    def answer(self, requested: int) -> dict[str, Any]:
        """The contract's 202 body for a request of `requested` ids."""
        answer: dict[str, Any] = {
            "enqueued": len(self.queue_ids),
            "skipped": requested - len(self.queue_ids) - self.already_marked,
            "already_marked": self.already_marked,
            "queue_ids": [str(q) for q in self.queue_ids],
            "same_answers": self.same_answers,
        }
        if self.run_id is not None:  # no row added: no run joined, and the answer as before
            answer["run_id"] = str(self.run_id)
        return answer


@dataclass(frozen=True)
class UnknownIds:
    """Some ids name no submission: nothing was enqueued."""

    ids: list[SubmissionId]


@dataclass(frozen=True)
class Replayed:
    """The Idempotency-Key's first request committed: its remembered answer."""

    answer: dict[str, Any]


@dataclass(frozen=True)
class KeyMismatch:
    """The Idempotency-Key was first used with a different body."""


# What one enqueue did (as dispatch answers Accepted | Busy | Failed).
EnqueueOutcome = Enqueued | UnknownIds | Replayed | KeyMismatch


@dataclass(frozen=True)
class DryRun:
    """What an enqueue would do and use, from the dry_run query (docs/concepts.md)."""

    rows: int
    already_marked: int
    unknown_ids: list[SubmissionId]
    # What one row of the assignment is expected to use, and where that came
    # from: "assignment", "pool" or "default".
    prompt_tokens: float
    completion_tokens: float
    source: str
    row_cost_usd: float | None
    # The same row on the pool's batch lane (docs/overnight.md): at its batch prices.
    batch_row_cost_usd: float | None
    # The group's and the pool's spend in the windows that hold now.
    group_hour: float
    group_day: float
    pool_day: float
    # Rows pending or in flight in the queue before these.
    ahead: int
    # Rows that would copy the mark of a row with the same answer (docs/same-answer.md);
    # `rows` leaves them out.
    same_answers: int = 0

    @classmethod
    def from_row(cls, row: Row) -> DryRun:
        fields = {name: row[name] for name in cls.__dataclass_fields__}
        fields["unknown_ids"] = [SubmissionId(u) for u in row["unknown_ids"]]
        return cls(**fields)
