"""A marker's doubt, as the webhook item carries it, and the teacher's side of it.

`review` on a completed item holds its result for a teacher (docs/review-holds.md).
Each field's rule raises the webhook's 422, naming the field, never the words sent.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal
from uuid import UUID

from pydantic import ConfigDict, Field, SkipValidation

from aiqueue.errors import Invalid
from aiqueue.storable import unstorable
from aiqueue.wire import rules
from aiqueue.wire.base import Wire
from aiqueue.wire.fields import Count, Time, Uuid, described
from aiqueue.wire.requests import optional, rule

Reason = Literal["clarification", "suspected_injection", "low_confidence"]
REASONS: tuple[Reason, ...] = ("clarification", "suspected_injection", "low_confidence")
# The longest question a marker may ask, and the longest answer a teacher may give.
MAX_QUESTION = 500
MAX_ANSWER = 2000


def _reason(value: object) -> object:
    if value not in REASONS:
        raise Invalid("review.reason must be 'clarification', 'suspected_injection' or "
                      "'low_confidence'")
    return value


def _question(value: object) -> object:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("review.question must be a non-empty string")
    if len(value) > MAX_QUESTION:
        raise Invalid(f"review.question must be at most {MAX_QUESTION} characters")
    if unstorable(value):
        raise Invalid("review.question must be text PostgreSQL can store")
    return value


def _score(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise Invalid("review.best_guess must be a finite number, 0 or more")
    return value


class ReviewRequest(Wire):
    """A completed item's `review`: why its result needs a teacher, and the marker's guess."""

    NOT_OBJECT: ClassVar[str] = "review must be a JSON object"

    reason: Annotated[Reason, rule(_reason)] = described(
        "clarification: the rubric doesn't decide the answer (ask `question`); "
        "suspected_injection: the answer speaks to the marker; low_confidence: the "
        "marker's own check failed")
    question: Annotated[str, Field(min_length=1, max_length=MAX_QUESTION),
                        optional(_question)] | None = described(
        "with a clarification only: the question for the teacher (content: never logged "
        "or notified)", default=None)
    best_guess: Annotated[float, Field(ge=0), SkipValidation, optional(_score)] | None = \
        described("the score the marker would give; the held result's score (none: no score)",
                  default=None)

    def check(self) -> ReviewRequest:
        """The rule across fields: a question exactly with a clarification."""
        if self.reason == "clarification" and self.question is None:
            raise Invalid("review.question is required with a clarification")
        if self.reason != "clarification" and self.question is not None:
            raise Invalid("review.question is only for a clarification")
        return self


class ClarifyRequest(Wire):
    """POST /api/marking/clarify: the teacher's answer to a marker's question."""

    model_config = ConfigDict(extra="forbid")

    assignment_id: Annotated[str, rule(rules.parse_assignment_id)]
    question_id: Annotated[Uuid, rule(lambda v: _question_id(v))]
    answer: Annotated[str, Field(min_length=1, max_length=MAX_ANSWER), rule(
        lambda v: _answer(v))] = described("the teacher's answer (content: never logged)")


def _question_id(value: object) -> object:
    if isinstance(value, str):
        try:
            return UUID(value)
        except ValueError:
            pass
    raise Invalid("question_id must be a UUID")


def _answer(value: object) -> object:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("answer must be a non-empty string")
    if len(value) > MAX_ANSWER:
        raise Invalid(f"answer must be at most {MAX_ANSWER} characters")
    if unstorable(value):
        raise Invalid("answer must be text PostgreSQL can store")
    return value.strip()


class HeldRow(Wire):
    """One held result in the teacher's list."""

    queue_id: Uuid
    submission_id: Uuid
    reason: Reason
    best_guess: float | None
    max_score: float | None
    held_at: Time
    question_id: Uuid | None


class AskedQuestion(Wire):
    """A marker's question, once per payload, with the held rows that asked it."""

    question_id: Uuid
    question: str
    payload_version: str | None
    rows: list[Uuid]
    answered: bool


class HeldResults(Wire):
    """GET /api/marking/review_needed's answer."""

    assignment_id: str
    count: Count = described("held results waiting for a teacher")
    items: list[HeldRow]
    questions: list[AskedQuestion]


class Clarified(Wire):
    """POST /api/marking/clarify's answer (202)."""

    question_id: Uuid
    payload_version: str = described("the new payload's version: the answer is in its "
                                     "marking_notes")
    run_id: Uuid | None = described("the run the askers' rows joined (null: none re-marked)")
    remarked: Count = described("rows that asked the question, enqueued again under the answer")
    moved: Count = described("the assignment's rows not yet dispatched, now under the answer")
    answered_at: Time


class ReviewNeeded(Wire):
    """A result is held for a teacher (notified): ids and the reason, never the question."""

    type: Literal["marking.review_needed"]
    queue_id: Uuid
    submission_id: Uuid
    assignment_id: str
    reason: Reason
    question_id: Uuid | None = described("with a clarification: the question's id "
                                         "(GET /api/marking/review_needed has its words)")
