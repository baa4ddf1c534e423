"""The JSON bodies the API takes, each once, as a type.

Each field carries its rule (rules.py) as a before-validator, so a wrong value
gets the same 422 sentence whichever route it came in by; `base.parse` is
the only caller of pydantic's validation.  The webhook's items are in webhook.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    SkipValidation,
    WithJsonSchema,
    model_validator,
)

from aiqueue.errors import Invalid
from aiqueue.storable import unstorable
from aiqueue.wire import rules
from aiqueue.wire.base import Wire
from aiqueue.wire.calibration import Calibrate, ReleaseWhen
from aiqueue.wire.fields import AnyObject, KindName, ShortText, Time, described

REF = "#/components/schemas/{model}"


def rule(check: Callable[[Any], Any]) -> BeforeValidator:
    """A field's rule: it returns the value to keep or raises the 4xx it means."""
    return BeforeValidator(check)


def optional(check: Callable[[Any], Any]) -> BeforeValidator:
    """A field's rule for a value that may be absent or null (then None)."""
    return BeforeValidator(lambda v: None if v is None else check(v))


def storable(name: str, what: str, kind: type) -> BeforeValidator:
    """A JSON value of `kind` that PostgreSQL's jsonb takes (absent or null: None)."""
    return BeforeValidator(lambda value: stored(name, what, kind, value))


def stored(name: str, what: str, kind: type, value: object) -> object:
    if value is None:
        return None
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise Invalid(f"{name} must be {what}")
    problem = unstorable(value)
    if problem:
        raise Invalid(f"{name} {problem}")
    return value


# Named EnqueueRequest in the description; enqueue.EnqueueRequest is the parsed command.
class EnqueueBody(Wire):
    """Submissions to mark, and how (-)."""

    # A field it doesn't name is a 422 that names it: a host that believes it
    # asked for something must not get something else.
    model_config = ConfigDict(title="EnqueueRequest", extra="forbid")

    assignment_id: Annotated[ShortText, rule(rules.parse_assignment_id)]
    # Canonical UUID strings as sent (rules.parse_submission_ids says why not uuid.UUID).
    submission_ids: Annotated[list[str], WithJsonSchema({
        "type": "array", "items": {"type": "string", "format": "uuid"}, "minItems": 1,
        "maxItems": rules.MAX_IDS}), rule(rules.parse_submission_ids)]
    priority: Annotated[int, Field(ge=-1_000_000, le=1_000_000),
                        optional(rules.parse_priority)] | None = None
    # Kept as the compact JSON text that is measured, stored and hashed (rules.payload_json).
    payload: Annotated[str, WithJsonSchema({
        "type": "object", "additionalProperties": True,
        "description": "up to 64 KiB, given to the function unchanged"}),
        optional(rules.payload_json)] | None = None
    group: Annotated[ShortText, optional(rules.parse_group)] | None = described(
        "whose turn and spend cap it is (default: the assignment); a host wanting turns and "
        "caps per teacher sends the teacher's id", default=None)
    remark: Annotated[bool, optional(lambda v: rules.flag(v, "remark"))] | None = None
    dry_run: Annotated[bool, optional(lambda v: rules.flag(v, "dry_run"))] | None = described(
        "write nothing and answer 200 with an EnqueueEstimate", default=None)
    kind: Annotated[KindName, optional(rules.parse_kind)] | None = described(
        "what the rows ask for, which names their function and pool (aiqueue.toml); default "
        "`mark`; a kind not declared is refused with 422 `unknown_kind`", default=None)
    lane: Annotated[Literal["live", "batch"], SkipValidation] | None = described(
        "batch: the provider's batch API at batch prices, by `deadline` (needs a pool with a "
        "batch API, else 422); absent: the kind's own lane (`lane` in its [kinds.*] table), "
        "else live", default=None)
    deadline: Annotated[Time, SkipValidation] | None = described(
        "RFC 3339, in the future; batch lane only; default now + 24 h", default=None)
    #: each moment as an RFC 3339 time or as seconds from now, not both
    # (the rule needs the clock, so enqueue.py applies it: parse_times).
    not_before: Annotated[Time, SkipValidation] | None = described(
        "not due before this time", default=None)
    delay_seconds: Annotated[float, Field(ge=0, le=2_592_000), SkipValidation] | None = None
    expires_at: Annotated[Time, SkipValidation] | None = described(
        "expired if not dispatched by then", default=None)
    expire_after_seconds: Annotated[float, Field(ge=1, le=31_536_000), SkipValidation] | None = None
    calibrate: Calibrate | None = described(
        "these rows are marked first; the rest wait for a release", default=None)
    release_when: ReleaseWhen | None = described(
        "the calibration rows' reviews release the rest once these are met", default=None)
    same_answers: Literal["mark_once", "mark_each"] | None = described(
        "mark_once (the default: the kind's `same_answers`, else mark_once) marks "
        "answers that are the same after normalising once and copies the mark; mark_each "
        "marks every answer", default=None)

    @model_validator(mode="after")
    def _calibration_rows_are_sent(self) -> EnqueueBody:
        chosen = self.calibrate.submission_ids if self.calibrate else None
        if chosen and not set(chosen) <= set(self.submission_ids):
            raise Invalid("calibrate.submission_ids must be among submission_ids")
        if self.release_when is not None and self.calibrate is None:
            raise Invalid("release_when needs calibrate")
        return self


class AcceptBody(Wire):
    """An accept's optional body: the teacher's adjusted result."""

    NOT_OBJECT: ClassVar[str] = 'the body must be {"result": {…}} or empty'
    model_config = ConfigDict(extra="forbid")

    result: Annotated[AnyObject, SkipValidation,
                      storable("result", "a JSON object", dict)] | None = described(
        "the teacher's adjusted result", default=None)


def _pattern(pattern: str, name: str, what: str) -> BeforeValidator:
    compiled = re.compile(pattern)

    def check(value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str) or not compiled.fullmatch(value):
            raise Invalid(f"{name} must be {what}")
        return value
    return BeforeValidator(check)


def _moment(name: str) -> BeforeValidator:
    def check(value: object) -> datetime | None:
        if value is None:
            return None
        return rules.parse_iso_time(value, name)
    return BeforeValidator(check)


class ReplayFilter(Wire):
    """Every field optional; absent or null = any."""

    NOT_OBJECT: ClassVar[str] = "filter must be a JSON object"
    model_config = ConfigDict(extra="forbid")

    assignment_id: Annotated[ShortText, optional(rules.parse_assignment_id)] | None = None
    group: Annotated[ShortText, optional(rules.parse_group)] | None = None
    kind: Annotated[KindName, _pattern("[a-z0-9_-]{1,32}", "kind", "[a-z0-9_-]{1,32}")] \
        | None = None
    error: Annotated[str, Field(pattern="^[a-z0-9_.:-]{1,64}$"),
                     _pattern("[a-z0-9_.:-]{1,64}", "error", "an error code")] | None = \
        described("the row's last_error code", default=None)
    failed_after: Annotated[Time, _moment("failed_after")] | None = None
    failed_before: Annotated[Time, _moment("failed_before")] | None = None

    @model_validator(mode="after")
    def _in_order(self) -> ReplayFilter:
        if self.failed_after and self.failed_before and self.failed_after >= self.failed_before:
            raise Invalid("failed_after must be before failed_before")
        return self


class ReplayRequest(Wire):
    model_config = ConfigDict(extra="forbid")

    filter: ReplayFilter = Field(default_factory=ReplayFilter)
    # Absent is false; null is not a flag (the description says boolean).
    dry_run: Annotated[bool, rule(lambda v: rules.flag(v if v is not None else 0, "dry_run"))] \
        = False


NOTE_CHARS = 200


def _note(value: object) -> str:
    """An operator's words: 1-200 characters, not only spaces, no control characters."""
    if value is None:
        raise Invalid("note is required")
    if (not isinstance(value, str) or not value.strip() or len(value) > NOTE_CHARS
            or any(ord(c) < 32 or ord(c) == 127 for c in value)):
        raise Invalid(f"note must be text of 1-{NOTE_CHARS} characters on one line")
    return value.strip()


class FailRequest(Wire):
    """An operator ends a pending row as failed: last_error "operator", the note in its
    history on /ai-queue only."""

    model_config = ConfigDict(extra="forbid")

    note: Annotated[str, Field(min_length=1, max_length=NOTE_CHARS), rule(_note)] = described(
        "the operator's words (no student content)")


class Error(Wire):
    """Every JSON error; some add fields (invalid_ids, unknown_ids, expected, found, kinds)."""

    model_config = ConfigDict(extra="allow")

    error: str
    detail: str
