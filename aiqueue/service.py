"""Queue rules the routes call: enqueue, webhook batches, operator actions, reading."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from aiqueue import logs, probes
from aiqueue.callbacks import MAX_ITEMS, ResultItem, apply_item, parse_item, settle_item
from aiqueue.errors import (
    BadHeader,
    Conflict,
    Invalid,
    KeyReused,
    NotFound,
    StoreError,
    Unauthorized,
)
from aiqueue.models import STATUSES, Job, QueueRow, Status
from aiqueue.runtime import Runtime
from aiqueue.storable import unstorable
from aiqueue.tokens import Tokens

MAX_IDS = 10_000
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_DEPTH = 32


@dataclass(frozen=True)
class EnqueueRequest:
    """A validated enqueue body."""

    assignment_id: str
    # From a request: strings as sent when canonical (the database parses them).
    submission_ids: Sequence[UUID | str]
    priority: int
    payload: dict[str, Any]
    group: str | None = None
    remark: bool = False
    # What an Idempotency-Key's repeat must match: a hash of the body as parsed.
    fingerprint: str = ""

    @classmethod
    def parse(cls, body: object) -> EnqueueRequest:
        """Validate the contract's enqueue body; raise Invalid naming the problem."""
        if not isinstance(body, dict):
            raise Invalid("the body must be a JSON object")
        assignment_id = parse_assignment_id(body.get("assignment_id"))
        group = parse_group(body.get("group"))
        remark = body.get("remark")
        if remark is None:
            remark = False
        if not isinstance(remark, bool):
            raise Invalid("remark must be true or false")
        ids = parse_submission_ids(body.get("submission_ids"))
        priority = body.get("priority", 0)
        if priority is None:
            priority = 0
        if not isinstance(priority, int) or isinstance(priority, bool) or abs(priority) > 1_000_000:
            raise Invalid("priority must be an integer between -1000000 and 1000000")
        payload = body.get("payload") or {}
        if not isinstance(payload, dict):
            raise Invalid("payload must be a JSON object")
        if json_depth(payload) > MAX_DEPTH:
            raise Invalid(f"payload is nested deeper than {MAX_DEPTH} levels")
        problem = unstorable(payload)
        if problem:
            raise Invalid(f"payload {problem}")
        if len(json.dumps(payload).encode()) > MAX_PAYLOAD_BYTES:
            raise Invalid("payload must be at most 64 KiB")
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return cls(assignment_id, ids, priority, payload, group, remark,
                   hashlib.sha256(canonical.encode()).hexdigest())


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


def json_depth(value: object, depth: int = 1) -> int:
    """How deeply a JSON value nests (iteratively bounded by MAX_DEPTH + 1)."""
    if depth > MAX_DEPTH:
        return depth
    if isinstance(value, dict):
        return max((json_depth(v, depth + 1) for v in value.values()), default=depth)
    if isinstance(value, list):
        return max((json_depth(v, depth + 1) for v in value), default=depth)
    return depth


async def enqueue(
    rt: Runtime, request: EnqueueRequest, idempotency_key: str | None = None
) -> tuple[dict[str, Any], bool]:
    """Enqueue atomically: the 202 body, and whether it replays an earlier key's answer."""
    key = (idempotency_key, request.fingerprint) if idempotency_key is not None else None
    outcome = await rt.store.enqueue(
        request.submission_ids, request.assignment_id, request.priority, request.payload,
        group=request.group, remark=request.remark, key=key,
    )
    if outcome.key_reused:
        raise KeyReused("this Idempotency-Key was used with a different body")
    if outcome.replayed is not None:
        logs.event("enqueue_replayed", assignment_id=request.assignment_id)
        return outcome.replayed, True
    if outcome.unknown_ids:
        raise Invalid(
            f"{len(outcome.unknown_ids)} submission id(s) do not exist; nothing was enqueued",
            extra={"unknown_ids": [str(u) for u in outcome.unknown_ids]},
        )
    answer = outcome.answer(len(request.submission_ids))
    logs.event("enqueue", assignment_id=request.assignment_id, enqueued=answer["enqueued"],
               skipped=answer["skipped"], already_marked=answer["already_marked"])
    return answer, False


@dataclass(frozen=True)
class Receipt:
    """What a webhook batch did: the answer's counts and what to run after answering."""

    counts: dict[str, int]
    # Slots the batch's results freed.
    freed: int
    # The batch ended with a completed item, whose transaction also claimed the
    # next row (`next_job`, None when nothing was claimable): no claim is left to do.
    settled: bool = False
    next_job: Job | None = None


WebhookItem = ResultItem | probes.ProbeAnswer | None


def _parse_webhook_item(raw: object, tokens: Tokens) -> WebhookItem:
    """A probe's answer (its token is a probe token), else a result item; None: rejected."""
    answer = probes.parse_probe(raw, tokens)
    if answer is not None:
        return answer
    if probes.is_probe_item(raw):
        return None  # a probe item without a valid probe token
    return parse_item(raw, tokens)


def verify_results(tokens: Tokens, body: object) -> list[WebhookItem]:
    """Parse a webhook batch and verify each item's token (None: rejected), without I/O.

    Every item is checked before any is applied: a malformed one fails the
    whole batch (422) with nothing changed; a batch with no valid token is 401.
    """
    items = body if isinstance(body, list) else [body]
    if not items:
        raise Invalid("the body must hold at least one item")
    if len(items) > MAX_ITEMS:
        raise Invalid(f"at most {MAX_ITEMS} items per request")
    try:
        parsed = [_parse_webhook_item(raw, tokens) for raw in items]
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    if not any(parsed):
        logs.event("webhook", accepted=0, ignored=0, rejected=len(parsed))
        raise Unauthorized("no item carries a valid callback token")
    return parsed


async def receive_results(rt: Runtime, parsed: list[WebhookItem]) -> Receipt:
    """Apply a verified webhook batch (from verify_results)."""
    counts = {"accepted": 0, "ignored": 0, "rejected": 0}
    freed = 0
    settled, next_job = False, None
    for n, item in enumerate(parsed, 1):
        if item is None:
            counts["rejected"] += 1
            continue
        if isinstance(item, probes.ProbeAnswer):
            # No row, no submission: only the waiting doctor hears of it.
            counts["accepted" if await probes.record(rt, item) else "ignored"] += 1
            continue
        applied = None
        if n == len(parsed) and item.status == "completed":
            # The usual callback (one completed item): apply it and claim the
            # next row in one round trip; every other item has been applied.
            try:
                applied, next_job = await settle_item(rt, item)
                settled = True
            except StoreError as exc:
                # The claim shares the result's transaction: whatever failed
                # there must not hold the result back.  Apply it alone; the
                # step after answering claims for itself.
                logs.event("settle_failed", code=exc.code, queue_id=item.claim.queue_id)
        if applied is None:
            applied = await apply_item(rt, item)
        counts["accepted" if applied else "ignored"] += 1
        freed += applied and item.status != "progress"
    logs.event("webhook", **counts)
    return Receipt(counts, freed, settled, next_job)


async def retry_row(rt: Runtime, queue_id: UUID, actor: str) -> dict[str, Any]:
    """A failed row becomes pending with fresh attempts."""
    if await rt.store.retry_failed(queue_id, actor):
        logs.event("retry", queue_id=queue_id, reason="manual")
        return {"queue_id": str(queue_id), "status": "pending"}
    status = await rt.store.row_status(queue_id)
    if status is None:
        raise NotFound(f"no queue row {queue_id}")
    raise Conflict(f"only failed rows can be retried; this row is {status}")


async def list_rows(
    rt: Runtime, *, status: Status | None, assignment_id: str | None, limit: int, offset: int,
    group: str | None = None,
) -> tuple[list[QueueRow], int]:
    rows = await rt.store.list_rows(
        status=status, assignment_id=assignment_id, limit=limit, offset=offset, group=group
    )
    total = await rt.store.count_rows(status=status, assignment_id=assignment_id, group=group)
    return rows, total
