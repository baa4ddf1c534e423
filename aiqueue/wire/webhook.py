"""The body the marking function posts to the webhook: its items.

Each field carries its rule as the other bodies do (requests.py), so a wrong
value gets the same 422 sentence.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    SkipValidation,
    WithJsonSchema,
    model_validator,
)

from aiqueue.backoff import MAX_RETRY_AFTER
from aiqueue.errors import Invalid
from aiqueue.wire import rules
from aiqueue.wire.base import Wire
from aiqueue.wire.fields import AnyObject, Count, described
from aiqueue.wire.holds import ReviewRequest
from aiqueue.wire.requests import REF, optional, rule, storable, stored

# The most items one webhook request may carry.
MAX_ITEMS = 1000


def _usage_object(value: object) -> object:
    """usage: a storable object, but a top-level number that isn't finite (`1e400` reads as
    inf) is let through: the usage is then refused for cost and turns, not the result with
    it (queue.results.sound_usage)."""
    if isinstance(value, dict):
        finite = {k: v for k, v in value.items()
                  if not (isinstance(v, float) and not math.isfinite(v))}
        stored("usage", "an object", dict, finite)
        return value
    return stored("usage", "an object", dict, value)


class WebhookUsage(Wire):
    model: str = ""
    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    total_tokens: Count = 0
    cost_usd: float = Field(default=0, ge=0)
    function_version: str = Field(default="", max_length=100, description=(
        "the function's own version: a change starts a drift canary, as a model's does"))


def _status(value: object) -> object:
    if value not in ("completed", "failed", "progress"):
        raise Invalid("status must be 'completed', 'failed' or 'progress'")
    return value


def _text(name: str) -> BeforeValidator:
    def check(value: object) -> object:
        if not isinstance(value, str):
            raise Invalid(f"{name} must be a string")
        return value
    return BeforeValidator(check)


def _retry_after(value: object, name: str) -> object:
    if value is not None and not (isinstance(value, int | float) and not isinstance(value, bool)
                                  and 0 <= value <= MAX_RETRY_AFTER):
        raise Invalid(f"{name} must be a number of seconds from 0 to {MAX_RETRY_AFTER}")
    return value


def _item_schema(schema: dict[str, Any]) -> None:
    # Every item carries its token (a missing one is rejected, not refused: see `token`),
    # and a completed item its result (or, held for a teacher, its review).
    schema["required"] = [*schema["required"], "token"]
    schema["if"] = {"properties": {"status": {"const": "completed"}}}
    schema["then"] = {"anyOf": [{"required": ["result"]}, {"required": ["review"]}]}


class WebhookItem(Wire):
    """One result item from the marking function, with its callback token."""

    NOT_OBJECT: ClassVar[str] = "each item must be a JSON object"
    model_config = ConfigDict(json_schema_extra=_item_schema)

    queue_id: Annotated[str, _text("queue_id")]
    # Absent or wrong, the item is rejected by the token check (a 401 if none is good).
    token: Annotated[str | None, SkipValidation, WithJsonSchema({"type": "string"})] = None
    status: Annotated[Literal["completed", "failed", "progress"], rule(_status)]
    result: Annotated[AnyObject, SkipValidation, storable("result", "an object", dict)] | None = \
        described("completed: the mark, stored as sent", default=None)
    # usage and progress are kept as the objects sent (their readers take what they know),
    # described by the types they should have.
    usage: Annotated[dict[str, Any], WithJsonSchema({"$ref": REF.format(model="WebhookUsage")}),
                     BeforeValidator(_usage_object)] | None = None
    # Any value: only a known code is ever kept (results.error_code), never the words.
    error: Annotated[object, WithJsonSchema({"type": "string"})] = described(
        "failed: a short code; `rate_limited` and `overloaded` are refusals that use no "
        "attempt", default=None)
    retry_after: Annotated[float, Field(ge=0, le=MAX_RETRY_AFTER), SkipValidation,
                           rule(lambda v: _retry_after(v, "retry_after"))] | None = described(
        "with a refusal: seconds to hold every dispatch", default=None)
    reset_after: Annotated[float, Field(ge=0, le=MAX_RETRY_AFTER), SkipValidation,
                           rule(lambda v: _retry_after(v, "reset_after"))] | None = described(
        "with a refusal: seconds until the model's whole budget is back (its "
        "`x-ratelimit-reset-*` headers); the queue learns the model's window from it",
        default=None)
    retryable: Annotated[bool, optional(lambda v: rules.flag(v, "retryable"))] | None = None
    progress: Annotated[dict[str, Any], WithJsonSchema({"$ref": REF.format(model="ProgressItem")}),
                        storable("progress", "an object", dict)] | None = None
    review: ReviewRequest | None = described(
        "completed: the result is held for a teacher (docs/review-holds.md); `result` may "
        "then be left out", default=None)

    @model_validator(mode="after")
    def _completed_has_a_result(self) -> WebhookItem:
        if self.review is not None:
            if self.status != "completed":
                raise Invalid("review is only for a completed item")
            self.review.check()
            top = (self.result or {}).get("max_score")
            guess = self.review.best_guess
            if guess is not None and isinstance(top, int | float) and not isinstance(top, bool) \
                    and guess > top:
                raise Invalid("review.best_guess must not be above the result's max_score")
        elif self.status == "completed" and self.result is None:
            raise Invalid("a completed item needs a result object")
        return self
