"""The rules of the API's single fields, shared by every request type that carries them.

Each raises the 4xx it means (Invalid: 422, BadHeader: 400, NotFound: 404) with
a sentence naming the field and never the value sent.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from uuid import UUID

from aiqueue.errors import BadHeader, Invalid, NotFound
from aiqueue.models import STATUSES, Status
from aiqueue.storable import unstorable

MAX_IDS = 10_000
MAX_PAYLOAD_BYTES = 64 * 1024
# How deeply a payload may nest: the one limit its single walk checks.
MAX_DEPTH = 32


def parse_rfc3339(value: object, name: str) -> datetime:
    """An RFC 3339 time with its offset (2026-11-27T17:00:00+01:00 or ...Z), in UTC."""
    problem = f"{name} must be an RFC 3339 time with a time zone, e.g. 2026-11-27T17:00:00Z"
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise Invalid(problem)
    # Python's parser takes at most microseconds: finer digits are dropped.
    text = re.sub(r"(\.\d{6})\d+", r"\1", value.upper().replace("Z", "+00:00"))
    try:
        # Year 9999 with a negative offset overflows in UTC.
        return datetime.fromisoformat(text).astimezone(UTC)
    except (ValueError, OverflowError):
        raise Invalid(problem) from None


_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})")


def payload_json(value: object) -> str:
    """The optional payload: a storable JSON object of at most 64 KiB, as compact JSON text.

    One walk checks depth and storability (storable.py); one dump makes the
    text that is measured, stored and hashed (sorted keys, so a client that
    re-serialises its body in another order still repeats the same request).
    """
    if not isinstance(value, dict):
        raise Invalid("payload must be a JSON object")
    problem = unstorable(value, max_depth=MAX_DEPTH)
    if problem:
        raise Invalid(f"payload {problem}")
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    if len(text) > MAX_PAYLOAD_BYTES:  # ASCII (ensure_ascii): characters are bytes
        raise Invalid("payload must be at most 64 KiB")
    return text



def parse_priority(value: object) -> int:
    """The optional priority: an integer of at most a million either way (default 0)."""
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or abs(value) > 1_000_000:
        raise Invalid("priority must be an integer between -1000000 and 1000000")
    return value


def flag(value: object, name: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise Invalid(f"{name} must be true or false")
    return value


_KIND = re.compile(r"[a-z0-9_-]{1,32}")


def parse_kind(value: object) -> str:
    """The optional `kind`: 1-32 of a-z, 0-9, _ and - (absent or null: `mark`)."""
    if value is None:
        return "mark"
    if not isinstance(value, str) or not _KIND.fullmatch(value):
        raise Invalid("kind must be 1 to 32 characters of a-z, 0-9, _ and -")
    return value


def parse_group(value: object) -> str | None:
    """The optional `group`: 1-200 characters (absent or null: the assignment)."""
    return None if value is None else short_text(value, "group")


def parse_idempotency_key(value: str | None) -> str | None:
    """The Idempotency-Key header: 1-255 printable ASCII characters, or absent."""
    if value is None:
        return None
    if not 1 <= len(value) <= 255 or not all(" " <= c <= "~" for c in value):
        raise BadHeader("Idempotency-Key must be 1-255 printable ASCII characters")
    return value


_CANONICAL_UUID = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def parse_submission_ids(ids: object) -> list[str]:
    """1..10,000 UUID strings, canonical; a 422 lists (some of) the ones that are not.

    The canonical form passes as sent (a regex is four times cheaper than
    uuid.UUID, 4 ms of 10,000 ids); other spellings uuid.UUID accepts are
    normalised."""
    if not isinstance(ids, list) or not ids:
        raise Invalid("submission_ids must be a non-empty array of UUIDs")
    if len(ids) > MAX_IDS:
        raise Invalid(f"at most {MAX_IDS} submission_ids per request")
    parsed, bad = [], []
    canonical = _CANONICAL_UUID.fullmatch
    for raw in ids:
        if isinstance(raw, str) and canonical(raw):
            parsed.append(raw)
            continue
        try:
            if not isinstance(raw, str) or len(raw) > 64:
                raise ValueError
            parsed.append(str(UUID(raw)))
        except ValueError:
            bad.append(raw if isinstance(raw, str) and len(raw) <= 64 else "<not a UUID string>")
    if bad:
        raise Invalid("submission_ids must be UUIDs", extra={"invalid_ids": bad[:50]})
    return parsed


def parse_assignment_id(value: object) -> str:
    return short_text(value, "assignment_id")


def short_text(value: object, name: str) -> str:
    """A non-empty, storable string of at most 200 characters, or Invalid naming the field."""
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise Invalid(f"{name} must be a non-empty string of at most 200 characters")
    problem = unstorable(value)
    if problem:
        raise Invalid(f"{name} {problem}")
    return value


def parse_uuid(value: str, what: str) -> UUID:
    """A path's id; one that is not a UUID names nothing (404)."""
    try:
        return UUID(value)
    except ValueError:
        raise NotFound(f"no {what} {value[:64]!r}") from None


def parse_status(value: str | None) -> Status | None:
    if value is None or value == "":
        return None
    for status in STATUSES:
        if value == status:
            return status
    raise Invalid(f"status must be one of {', '.join(STATUSES)}")


def parse_iso_time(value: object, name: str) -> datetime:
    """An ISO 8601 time; one without an offset is taken as UTC."""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return in_utc(moment, f"{name} must be an RFC 3339 time")
    raise Invalid(f"{name} must be an RFC 3339 time")


def in_utc(moment: datetime, problem: str) -> datetime:
    """A time in UTC (none given: UTC), a day clear of Python's years 1 and 9999 so that
    an offset or a default span around it never overflows (Invalid: `problem`)."""
    try:
        found = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    except OverflowError:
        raise Invalid(problem) from None
    if not EARLIEST <= found <= LATEST:
        raise Invalid(f"{problem} between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}")
    return found


# The times a query may name: no record is older, and any span from them stays in range.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
