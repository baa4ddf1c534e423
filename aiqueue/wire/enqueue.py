"""An enqueue, parsed: the body's type (requests.EnqueueBody) and the rules that need the clock.

What comes back is typed and known to be storable, so the database never
sees bad input.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from aiqueue.answers import SameAnswers
from aiqueue.errors import Invalid
from aiqueue.settings.kinds import Lane
from aiqueue.wire.base import parse
from aiqueue.wire.calibration import Calibrate, ReleaseWhen
from aiqueue.wire.requests import EnqueueBody
from aiqueue.wire.rules import parse_rfc3339

EMPTY_PAYLOAD = "{}"


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
    # What the rows ask for, which names their function and pool.
    kind: str = "mark"
    # An estimate only: nothing is written.
    dry_run: bool = False
    #: not due before `not_before`; expired if not dispatched by `expires_at`.
    not_before: datetime | None = None
    expires_at: datetime | None = None
    # The overnight lane: "batch" rows are marked by `deadline` at batch prices.
    # None: the request names no lane, and its kind's default lane holds.
    lane: Lane | None = None
    deadline: datetime | None = None
    #; None: the kind's `same_answers`.
    same_answers: SameAnswers | None = None
    # The calibration gate: these rows first, the rest held until released.
    calibrate: Calibrate | None = None
    release_when: ReleaseWhen | None = None

    @classmethod
    def parse(cls, body: object, now: datetime | None = None) -> EnqueueRequest:
        """Validate the contract's enqueue body; raise Invalid naming the problem.

        `now` (default: this machine's clock) anchors delay_seconds and
        expire_after_seconds.
        """
        b = parse(EnqueueBody, body)
        assert isinstance(body, dict)  # parse proved it
        not_before, expires_at = parse_times(body, now or datetime.now(UTC))
        payload = b.payload or EMPTY_PAYLOAD
        lane, deadline = parse_lane(body.get("lane"), body.get("deadline"), now)
        return cls(b.assignment_id, b.submission_ids, b.priority or 0, payload, b.group,
                   bool(b.remark), fingerprint(body, payload), kind=b.kind or "mark",
                   dry_run=bool(b.dry_run), not_before=not_before, expires_at=expires_at,
                   lane=lane, deadline=deadline, same_answers=b.same_answers,
                   calibrate=b.calibrate, release_when=b.release_when)


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
    """(not_before, expires_at) from the body's time fields, both UTC.

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

