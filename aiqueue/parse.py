"""The HTTP edge's input, parsed in one place: pure functions, each raising the 4xx it means.

Routes read a body, a header or a path parameter and hand it here; what comes
back is typed and known to be storable, so the database never sees bad input.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from aiqueue.errors import BadHeader, Invalid, NotFound
from aiqueue.models import STATUSES, Status
from aiqueue.storable import unstorable

MAX_IDS = 10_000
MAX_PAYLOAD_BYTES = 64 * 1024
# How deeply a payload may nest: the one limit its single walk checks.
MAX_DEPTH = 32
EMPTY_PAYLOAD = "{}"
Lane = Literal["live", "batch"]


@dataclass(frozen=True)
class EnqueueRequest:
    """A validated enqueue body."""

    assignment_id: str
    # From a request: strings as sent when canonical (the database parses them).
    submission_ids: Sequence[UUID | str]
    priority: int
    # The payload as JSON text, serialised once (payload_json): stored and hashed as is.
    payload: str = EMPTY_PAYLOAD
    group: str | None = None
    remark: bool = False
    # What an Idempotency-Key's repeat must match: a hash of the body as parsed.
    fingerprint: str = ""
    # What the rows ask for, which names their function and pool (CONTRACT §9b).
    kind: str = "mark"
    # An estimate only (CONTRACT §9c): nothing is written.
    dry_run: bool = False
    # CONTRACT §9d: not due before `not_before`; expired if not dispatched by `expires_at`.
    not_before: datetime | None = None
    expires_at: datetime | None = None
    # The overnight lane (§9f): "batch" rows are marked by `deadline` at batch prices.
    # None: the request names no lane, and its kind's default lane holds.
    lane: Lane | None = None
    deadline: datetime | None = None

    @classmethod
    def parse(cls, body: object, now: datetime | None = None) -> EnqueueRequest:
        """Validate the contract's enqueue body; raise Invalid naming the problem.

        `now` (default: this machine's clock) anchors delay_seconds and
        expire_after_seconds.
        """
        if not isinstance(body, dict):
            raise Invalid("the body must be a JSON object")
        not_before, expires_at = parse_times(body, now or datetime.now(UTC))
        assignment_id = parse_assignment_id(body.get("assignment_id"))
        group = parse_group(body.get("group"))
        remark = _flag(body.get("remark"), "remark")
        ids = parse_submission_ids(body.get("submission_ids"))
        priority = parse_priority(body.get("priority"))
        raw = body.get("payload")
        payload = EMPTY_PAYLOAD if raw is None else payload_json(raw)
        lane, deadline = parse_lane(body.get("lane"), body.get("deadline"), now)
        return cls(assignment_id, ids, priority, payload, group, remark,
                   fingerprint(body, payload), kind=parse_kind(body.get("kind")),
                   dry_run=_flag(body.get("dry_run"), "dry_run"),
                   not_before=not_before, expires_at=expires_at,
                   lane=lane, deadline=deadline)


def parse_lane(lane: object, deadline: object, now: datetime | None = None
               ) -> tuple[Lane | None, datetime | None]:
    """`lane` ("live" or "batch"; None: the kind's default) and its `deadline` (RFC 3339, in
    the future; with no lane, the enqueue checks it against the kind's lane)."""
    if lane == "live":
        if deadline is not None:
            raise Invalid('deadline is for "lane": "batch" only')
        return "live", None
    if lane is not None and lane != "batch":
        raise Invalid('lane must be "live" or "batch"')
    if deadline is None:
        return lane, None
    when = parse_rfc3339(deadline.strip() if isinstance(deadline, str) else deadline,
                         "deadline")
    if when <= (now or datetime.now(UTC)):
        raise Invalid("deadline must be in the future")
    return lane, when


# The longest delay an enqueue may ask for (30 days), as Cloud Tasks allows.
MAX_DELAY_SECONDS = 2_592_000
# How far ahead a not_before or an expiry may lie: a school year.
MAX_AHEAD = timedelta(days=365)


def parse_times(body: Mapping[str, Any], now: datetime) -> tuple[datetime | None,
                                                                  datetime | None]:
    """(not_before, expires_at) from the body's time fields (CONTRACT §9d), both UTC.

    Each moment may be given as an RFC 3339 time or as seconds from now, not both.
    """
    not_before = _moment(body, "not_before", "delay_seconds", now, MAX_DELAY_SECONDS)
    expires_at = _moment(body, "expires_at", "expire_after_seconds", now,
                         int(MAX_AHEAD.total_seconds()))
    if expires_at is not None:
        if expires_at <= now:
            raise Invalid("expires_at must be in the future")
        if not_before is not None and expires_at <= not_before:
            raise Invalid("expires_at must be after not_before")
    return not_before, expires_at


def _moment(body: Mapping[str, Any], at_name: str, after_name: str, now: datetime,
            most: int) -> datetime | None:
    at, after = body.get(at_name), body.get(after_name)
    if at is not None and after is not None:
        raise Invalid(f"give {at_name} or {after_name}, not both")
    if after is not None:
        # An expiry of 0 s would end the rows before anything could take them.
        least = 0 if at_name == "not_before" else 1
        if isinstance(after, bool) or not isinstance(after, int | float) \
                or not least <= after <= most:
            raise Invalid(f"{after_name} must be a number of seconds from {least} to {most}")
        return now + timedelta(seconds=after)
    if at is None:
        return None
    moment = parse_rfc3339(at, at_name)
    if moment > now + MAX_AHEAD:
        raise Invalid(f"{at_name} must be at most 365 days ahead")
    return moment


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


def fingerprint(body: Mapping[str, Any], payload: str) -> str:
    """sha256 of the body's canonical JSON (sorted keys, compact), reusing the payload's text.

    The same bytes as json.dumps(body, sort_keys=True, separators=(",", ":")),
    so keys saved before this function existed still match their repeats.
    """
    digest = hashlib.sha256()
    digest.update(b"{")
    for n, name in enumerate(sorted(body)):
        value = body[name]
        part = payload if name == "payload" and isinstance(value, dict) else json.dumps(
            value, sort_keys=True, separators=(",", ":"))
        digest.update(f'{"," if n else ""}{json.dumps(name)}:{part}'.encode())
    digest.update(b"}")
    return digest.hexdigest()


def parse_priority(value: object) -> int:
    """The optional priority: an integer of at most a million either way (default 0)."""
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or abs(value) > 1_000_000:
        raise Invalid("priority must be an integer between -1000000 and 1000000")
    return value


def _flag(value: object, name: str) -> bool:
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
    return None if value is None else _short_text(value, "group")


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
    return _short_text(value, "assignment_id")


def _short_text(value: object, name: str) -> str:
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
