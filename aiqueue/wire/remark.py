"""A re-mark's request and answers (docs/remark.md): POST /api/marking/remark."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, ConfigDict, Field, WithJsonSchema

from aiqueue.errors import Invalid
from aiqueue.wire import rules
from aiqueue.wire.answers import SpendCaps
from aiqueue.wire.base import Wire
from aiqueue.wire.fields import Count, Seconds, ShortText, Usd, Uuid, described

# The longest debounce a re-mark may ask for: a day.
MAX_DEBOUNCE_SECONDS = 86_400
DEFAULT_DEBOUNCE_SECONDS = 60.0


def _payload(value: object) -> str:
    if value is None:
        raise Invalid("payload is required: the assignment's new payload (a JSON object)")
    return rules.payload_json(value)


def _debounce(value: object) -> float:
    if value is None:
        return DEFAULT_DEBOUNCE_SECONDS
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0 <= value <= MAX_DEBOUNCE_SECONDS:
        raise Invalid(f"debounce_seconds must be a number of seconds from 0 to "
                      f"{MAX_DEBOUNCE_SECONDS}")
    return float(value)


class RemarkRequest(Wire):
    """A new payload for an assignment, and its re-mark."""

    model_config = ConfigDict(extra="forbid")

    assignment_id: Annotated[ShortText, BeforeValidator(rules.parse_assignment_id)]
    # Kept as the compact JSON text that is stored and hashed (rules.payload_json).
    payload: Annotated[str, WithJsonSchema({
        "type": "object", "additionalProperties": True,
        "description": "the assignment's new payload (up to 64 KiB), e.g. the edited rubric"}),
        BeforeValidator(_payload)]
    # Absent or null: the default (as the enqueue's optional fields).
    include_reviewed: Annotated[bool, BeforeValidator(
        lambda v: rules.flag(v, "include_reviewed"))] | None = described(
        "re-mark answers a teacher accepted or adjusted too (default false: kept)",
        default=None)
    debounce_seconds: Annotated[float, Field(ge=0, le=MAX_DEBOUNCE_SECONDS),
                                BeforeValidator(_debounce)] | None = described(
        "rows not yet dispatched that an edit of this assignment enqueued this many seconds "
        "ago or less, under another payload, end cancelled (\"superseded\"); default 60",
        default=None)
    dry_run: Annotated[bool, BeforeValidator(
        lambda v: rules.flag(v, "dry_run"))] | None = described(
        "count and price it, enqueue nothing (200)", default=None)


class RemarkAccepted(Wire):
    """What a re-mark did (202)."""

    run_id: Uuid | None = described("the run its rows joined; null when none was added")
    enqueued: Count = described("submissions enqueued again under the new payload")
    unchanged: Count = described("submissions already marked (or being marked) under it")
    reviewed_kept: Count = described("teacher-reviewed marks left alone")
    same_answers: Count = described("rows that will copy the mark of a row with the same answer")
    superseded: Count = described("rows of an earlier edit, not yet dispatched, cancelled")


class RemarkEstimate(Wire):
    """A re-mark's dry run (200): its counts and the estimate before Mark All; nothing written."""

    enqueued: Count = described("submissions that would be enqueued again")
    unchanged: Count
    reviewed_kept: Count
    same_answers: Count
    rows: Count = described("answers the model would mark (copies of a mark excluded)")
    already_marked: Count = described(
        "always 0: a re-mark marks again what its payload changed", default=0)
    estimated_tokens: Count
    estimated_cost_usd: Usd | None
    eta_seconds: Seconds
    capped: SpendCaps | None = described(
        "the spend caps this re-mark would reach, with their values; null when none would")
    lane: str = described("the lane its rows go on", default="live")
