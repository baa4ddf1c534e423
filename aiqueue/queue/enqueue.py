"""Queue rules the routes call: enqueue, webhook batches, operator actions, reading."""

from __future__ import annotations

from uuid import UUID

from aiqueue import logs
from aiqueue.errors import (
    Conflict,
    Invalid,
    KeyReused,
    NotFound,
    StoreError,
    Unauthorized,
    UnknownKind,
)
from aiqueue.models import Job, KeyMismatch, QueueRow, Replayed, Status, UnknownIds
from aiqueue.ports import WebhookStore
from aiqueue.queue import calibration, overnight, probes
from aiqueue.queue.lanes import lane_of
from aiqueue.queue.loop import Receipt
from aiqueue.queue.results import ResultItem, apply_item, parse_item, settle_item
from aiqueue.runtime import Runtime
from aiqueue.tokens import Tokens
from aiqueue.wire import EnqueueRequest
from aiqueue.wire.answers import EnqueueAccepted, RetryAnswer
from aiqueue.wire.requests import MAX_ITEMS


async def enqueue(
    rt: Runtime, request: EnqueueRequest, idempotency_key: str | None = None
) -> tuple[EnqueueAccepted, bool]:
    """Enqueue atomically: the 202 body, and whether it replays an earlier key's answer.

    The answer is kept (for the key's repeats) as the mapping the store wrote, so what
    is stored stays as it was; both are read here as the type.
    """
    key = (idempotency_key, request.fingerprint) if idempotency_key is not None else None
    kinds = rt.settings.queue.kinds
    if request.kind not in kinds:
        raise UnknownKind(f"kind {request.kind!r} is not declared; the kinds are "
                          f"{', '.join(sorted(kinds))}", extra={"kinds": sorted(kinds)})
    kind = kinds[request.kind]
    batch = None
    if lane_of(rt, request) == "batch":
        batch = await overnight.lane_times(rt, kind.pool, request.deadline)
    outcome = await rt.store.enqueue(
        request.submission_ids, request.assignment_id, request.priority, request.payload,
        group=request.group, remark=request.remark, key=key, kind=request.kind,
        pool=kind.pool, batch=batch,
        not_before=request.not_before, expires_at=request.expires_at,
        gate=calibration.asked(request),
    )
    match outcome:
        case KeyMismatch():
            raise KeyReused("this Idempotency-Key was used with a different body")
        case Replayed(stored):
            logs.event("enqueue_replayed", assignment_id=request.assignment_id)
            return EnqueueAccepted.model_validate(stored), True
        case UnknownIds(ids):
            raise Invalid(f"{len(ids)} submission id(s) do not exist; nothing was enqueued",
                          extra={"unknown_ids": [str(u) for u in ids]})
    answer = EnqueueAccepted.model_validate(outcome.answer(len(request.submission_ids)))
    logs.event("enqueue", assignment_id=request.assignment_id, kind=request.kind,
               enqueued=answer.enqueued,
               skipped=answer.skipped, already_marked=answer.already_marked)
    return answer, False


WebhookItem = ResultItem | probes.ProbeAnswer | None


def _parse_webhook_item(raw: object, tokens: Tokens) -> WebhookItem:
    """A probe's answer (its token is a probe token), else a result item; None: rejected."""
    # The usual item carries a callback token: verify it first and once.  It is then
    # no probe token (their salts differ), so the probe check is only for the rest.
    claim = tokens.verify_callback(raw.get("token")) if isinstance(raw, dict) else None
    if claim is None:
        answer = probes.parse_probe(raw, tokens)
        if answer is not None:
            return answer
    if probes.is_probe_item(raw):
        return None  # a probe item without a valid probe token
    return parse_item(raw, tokens, claim)


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
    parsed = [_parse_webhook_item(raw, tokens) for raw in items]
    if not any(parsed):
        logs.event("webhook", accepted=0, ignored=0, rejected=len(parsed))
        raise Unauthorized("no item carries a valid callback token")
    return parsed


async def receive_results(rt: Runtime[WebhookStore], parsed: list[WebhookItem]) -> Receipt:
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
            applied, next_job, settled = await _settle(rt, item)
        if applied is None:
            applied = await apply_item(rt, item)
        counts["accepted" if applied else "ignored"] += 1
        freed += applied and item.status != "progress"
    logs.event("webhook", **counts)
    return Receipt(counts, freed, settled, next_job)


async def _settle(rt: Runtime[WebhookStore], item: ResultItem
                  ) -> tuple[bool | None, Job | None, bool]:
    """settle_item, once more when it failed: (applied or None, next job, settled).

    The first failure may be a lost answer of a settle that committed; its
    repeat then hands back the row that settle claimed (CONTRACT §9a) rather
    than leave it claimed with no dispatch.  Should the repeat fail too, the
    result is applied alone by the caller and the step after answering claims.
    """
    for tries_left in (1, 0):
        try:
            applied, job = await settle_item(rt, item)
            return applied, job, True
        except StoreError as exc:
            # The claim shares the result's transaction: whatever failed there
            # must not hold the result back.
            logs.event("settle_failed", code=exc.code, queue_id=item.claim.queue_id,
                       reason="will_repeat" if tries_left else "apply_alone")
    return None, None, False


async def retry_row(rt: Runtime, queue_id: UUID, actor: str) -> RetryAnswer:
    """A failed row becomes pending with fresh attempts."""
    if await rt.store.retry_failed(queue_id, actor):
        logs.event("retry", queue_id=queue_id, reason="manual")
        return RetryAnswer(queue_id=queue_id, status="pending")
    status = await rt.store.row_status(queue_id)
    if status is None:
        raise NotFound(f"no queue row {queue_id}")
    raise Conflict(f"only failed rows can be retried; this row is {status}")


async def list_rows(
    rt: Runtime, *, status: Status | None, assignment_id: str | None, limit: int, offset: int,
    group: str | None = None, kind: str | None = None,
) -> tuple[list[QueueRow], int]:
    rows = await rt.store.list_rows(
        status=status, assignment_id=assignment_id, limit=limit, offset=offset, group=group,
        kind=kind,
    )
    total = await rt.store.count_rows(status=status, assignment_id=assignment_id, group=group,
                                      kind=kind)
    return rows, total
