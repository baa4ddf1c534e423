"""Replay by filter: failed rows back to pending, in one statement, safe to press twice.

Only rows still `failed` move, each with fresh attempts and a fresh turn
(aiqueue_retry, as an enqueue hands turns out), and the claim then paces them
under every limit.  A dry run counts and writes nothing.  With an
Idempotency-Key a repeat gets the first answer again (the enqueue's mechanism,
the same table), and the same key with another body is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiqueue import logs
from aiqueue.errors import Invalid, KeyReused
from aiqueue.models import KeyMismatch, Replayed
from aiqueue.models.records import ReplayFilter
from aiqueue.runtime import Runtime
from aiqueue.wire.rules import parse_assignment_id, parse_group

_KIND = re.compile(r"[a-z0-9_-]{1,32}")
_ERROR = re.compile(r"[a-z0-9_.:-]{1,64}")
_FIELDS = {"assignment_id", "group", "kind", "error", "failed_after", "failed_before"}


@dataclass(frozen=True)
class ReplayRequest:
    """A validated replay body."""

    where: ReplayFilter
    dry_run: bool
    # What an Idempotency-Key's repeat must match (never equal to an enqueue's hash).
    fingerprint: str

    @classmethod
    def parse(cls, body: object) -> ReplayRequest:
        if not isinstance(body, dict):
            raise Invalid("the body must be a JSON object")
        unknown = set(body) - {"filter", "dry_run"}
        if unknown:
            raise Invalid(f"unknown field(s): {', '.join(sorted(unknown))}")
        raw = body.get("filter", {})
        if not isinstance(raw, dict):
            raise Invalid("filter must be a JSON object")
        if set(raw) - _FIELDS:
            raise Invalid(f"filter may only name {', '.join(sorted(_FIELDS))}")
        dry_run = body.get("dry_run", False)
        if not isinstance(dry_run, bool):
            raise Invalid("dry_run must be true or false")
        where = ReplayFilter(
            assignment_id=_opt(raw, "assignment_id", parse_assignment_id),
            group=parse_group(raw.get("group")),
            kind=_opt(raw, "kind", lambda v: _pattern(v, _KIND, "kind", "[a-z0-9_-]{1,32}")),
            error=_opt(raw, "error", lambda v: _pattern(v, _ERROR, "error", "an error code")),
            failed_after=_opt(raw, "failed_after", lambda v: _time(v, "failed_after")),
            failed_before=_opt(raw, "failed_before", lambda v: _time(v, "failed_before")),
        )
        if (where.failed_after and where.failed_before
                and where.failed_after >= where.failed_before):
            raise Invalid("failed_after must be before failed_before")
        canonical = json.dumps({"replay": body}, sort_keys=True, separators=(",", ":"))
        return cls(where, dry_run, hashlib.sha256(canonical.encode()).hexdigest())


def _opt(raw: dict[str, Any], name: str, parse: Any) -> Any:
    value = raw.get(name)
    return None if value is None else parse(value)


def _pattern(value: object, pattern: re.Pattern[str], name: str, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise Invalid(f"{name} must be {what}")
    return value


def _time(value: object, name: str) -> datetime:
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    raise Invalid(f"{name} must be an RFC 3339 time")


async def replay(rt: Runtime, request: ReplayRequest, *, actor: str,
                 key: str | None = None) -> tuple[dict[str, Any], bool]:
    """Run (or dry-run) a replay: the 200 body, and whether it repeats a key's first answer."""
    outcome = await rt.store.replay(request.where, dry_run=request.dry_run, actor=actor,
                                    key=(key, request.fingerprint) if key else None)
    match outcome:
        case KeyMismatch():
            raise KeyReused("this Idempotency-Key was used with a different body")
        case Replayed(answer):
            return answer, True
    logs.event("replay", matched=outcome.matched, replayed=outcome.replayed,
               mode="dry_run" if request.dry_run else "replay")
    return outcome.answer(), False
