"""A teacher's review, answered: one mark accepted or reverted, a run's, and a
submission's history of results.  Each shape once, as a type (see answers.py).
"""

from __future__ import annotations

from typing import Literal

from aiqueue import models
from aiqueue.wire.base import Wire
from aiqueue.wire.fields import PAYLOAD_VERSION, AnyObject, Count, Review, Time, Uuid, described


class Accepted(Wire):
    queue_id: Uuid
    review: Literal["accepted"]
    accepted_at: Time


class Reverted(Wire):
    queue_id: Uuid
    review: Literal["reverted"]
    reverted_at: Time


class RunAccepted(Wire):
    accepted: Count


class RunReverted(Wire):
    reverted: Count
    superseded: Count


class AppliedResult(Wire):
    queue_id: Uuid
    applied_at: Time
    result: AnyObject
    review: Review
    accepted_at: Time | None
    reverted_at: Time | None
    actor: str | None
    adjusted_result: AnyObject | None = None
    payload_version: str | None = described(PAYLOAD_VERSION, default=None)
    applied: bool = described("false: made under an older payload than the mark it found; "
                              "recorded, never applied", default=True)

    @classmethod
    def of(cls, row: models.AppliedResult) -> AppliedResult:
        """A stored result as the history lists it (adjusted_result always sent)."""
        return cls(queue_id=row.queue_id, applied_at=row.applied_at, result=row.result,
                   review=row.review, accepted_at=row.accepted_at, reverted_at=row.reverted_at,
                   actor=row.actor, adjusted_result=row.adjusted_result,
                   payload_version=row.payload_version, applied=row.applied)


class ResultHistory(Wire):
    items: list[AppliedResult]
