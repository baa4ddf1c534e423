"""The enqueue: rows for a run's submissions, atomically, once per idempotency key."""

from __future__ import annotations

from aiqueue import logs
from aiqueue.errors import (
    Invalid,
    KeyReused,
    UnknownKind,
)
from aiqueue.models import KeyMismatch, Replayed, UnknownIds
from aiqueue.queue import overnight
from aiqueue.queue.lanes import lane_of
from aiqueue.runtime import Runtime
from aiqueue.wire import EnqueueRequest
from aiqueue.wire.answers import EnqueueAccepted


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
