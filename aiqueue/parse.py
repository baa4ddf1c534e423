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
from datetime import UTC, datetime
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
_RFC3339 = re.compile(
    r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)")


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
    # The overnight lane (§9f): "batch" rows are marked by `deadline` at batch prices.
    lane: Lane = "live"
    deadline: datetime | None = None

    @classmethod
    def parse(cls, body: object) -> EnqueueRequest:
        """Validate the contract's enqueue body; raise Invalid naming the problem."""
        if not isinstance(body, dict):
            raise Invalid("the body must be a JSON object")
        assignment_id = parse_assignment_id(body.get("assignment_id"))
        group = parse_group(body.get("group"))
        remark = _flag(body.get("remark"), "remark")
        ids = parse_submission_ids(body.get("submission_ids"))
        priority = parse_priority(body.get("priority"))
        raw = body.get("payload")
        payload = EMPTY_PAYLOAD if raw is None else payload_json(raw)
        lane, deadline = parse_lane(body.get("lane"), body.get("deadline"))
        return cls(assignment_id, ids, priority, payload, group, remark,
                   fingerprint(body, payload), lane, deadline)


def parse_lane(lane: object, deadline: object, now: datetime | None = None
               ) -> tuple[Lane, datetime | None]:
    """`lane` ("live" or "batch"; default live) and its `deadline` (RFC 3339, in the future)."""
    if lane is None or lane == "live":
        if deadline is not None:
            raise Invalid('deadline is for "lane": "batch" only')
        return "live", None
    if lane != "batch":
        raise Invalid('lane must be "live" or "batch"')
    if deadline is None:
        return "batch", None
    if not isinstance(deadline, str) or not _RFC3339.fullmatch(deadline.strip()):
        raise Invalid("deadline must be an RFC 3339 date-time with a time zone")
    try:
        when = datetime.fromisoformat(deadline.strip().replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise Invalid("deadline must be an RFC 3339 date-time with a time zone") from None
    if when <= (now or datetime.now(UTC)):
        raise Invalid("deadline must be in the future")
    return "batch", when


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
