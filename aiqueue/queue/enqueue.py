"""The enqueue: rows for a run's submissions, atomically, once per idempotency key; and its
dry run, the estimate before Mark All (docs/concepts.md), which writes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from uuid import UUID

from aiqueue import logs
from aiqueue.answers import AnswerKey
from aiqueue.errors import Invalid, KeyReused, UnknownKind
from aiqueue.models import DryRun, KeyMismatch, Replayed, UnknownIds
from aiqueue.queue import calibration, canary, holds, overnight
from aiqueue.queue.progress import run_eta
from aiqueue.runtime import Runtime
from aiqueue.settings.kinds import Kind
from aiqueue.settings.money import PoolMoney
from aiqueue.wire import EnqueueRequest
from aiqueue.wire.answers import EnqueueAccepted, EnqueueEstimate, EstimatePart, SpendCaps


async def enqueue(
    rt: Runtime, request: EnqueueRequest, idempotency_key: str | None = None,
    caller: str | None = None,
) -> tuple[EnqueueAccepted, bool]:
    """Enqueue atomically: the 202 body, and whether it replays an earlier key's answer.

    `caller`: the request's W3C traceparent, which each new job's trace links to.

    The answer is kept (for the key's repeats) as the mapping the store wrote, so what
    is stored stays as it was; both are read here as the type.
    """
    key = (idempotency_key, request.fingerprint) if idempotency_key is not None else None
    request = await holds.noted(rt, request)  # teachers' answers for its rubric
    kind = _declared_kind(rt, request.kind)
    batch = None
    if overnight.lane_of(rt, request) == "batch":
        batch = await overnight.lane_times(rt, kind.pool, request.deadline)
    started = rt.tracer.now()
    outcome = await rt.store.enqueue(
        request.submission_ids, request.assignment_id, request.priority, request.payload,
        group=request.group, remark=request.remark, key=key, kind=request.kind,
        pool=kind.pool, batch=batch,
        not_before=request.not_before, expires_at=request.expires_at,
        answer_key=answer_key(rt, request, kind),
        # A kind whose canary drifted gates every enqueue that names no gate of its own.
        gate=calibration.asked(request) or await canary.drift_gate(rt, kind),
    )
    match outcome:
        case KeyMismatch():
            raise KeyReused("this Idempotency-Key was used with a different body")
        case Replayed(stored):
            logs.event("enqueue_replayed", assignment_id=request.assignment_id)
            return EnqueueAccepted.model_validate(stored), True
        case UnknownIds(ids):
            raise _unknown_ids(ids, "; nothing was enqueued")
    answer = EnqueueAccepted.model_validate(outcome.answer(len(request.submission_ids)))
    await rt.tracer.enqueued(rt.store, outcome.queue_ids, started, kind=request.kind,
                             pool=kind.pool, caller=caller)
    logs.event("enqueue", assignment_id=request.assignment_id, kind=request.kind,
               enqueued=answer.enqueued,
               skipped=answer.skipped, already_marked=answer.already_marked,
               same_answers=answer.same_answers)
    return answer, False


def _declared_kind(rt: Runtime, name: str) -> Kind:
    """The kind called `name`; 422 naming the declared ones when there is none."""
    kinds = rt.settings.queue.kinds
    if name not in kinds:
        raise UnknownKind(f"kind {name!r} is not declared; the kinds are "
                          f"{', '.join(sorted(kinds))}", extra={"kinds": sorted(kinds)})
    return kinds[name]


def answer_key(rt: Runtime, request: EnqueueRequest, kind: Kind) -> AnswerKey | None:
    """The key that groups the same answers (docs/same-answer.md): the request's
    `same_answers`, else its kind's; None: each is marked on its own.  The kind's
    "loose" normalises loosely whenever its answers are grouped."""
    if request.same_answers == "mark_each" or (
            request.same_answers is None and kind.same_answers in ("off", "mark_each")):
        return None
    key = rt.tokens.answer_key
    return key.loosely() if kind.same_answers == "loose" else key


def _unknown_ids(ids: Sequence[UUID], tail: str = "") -> Invalid:
    """The 422 for submission ids that do not exist, naming them."""
    return Invalid(f"{len(ids)} submission id(s) do not exist{tail}",
                   extra={"unknown_ids": [str(u) for u in ids]})


async def dry_run(rt: Runtime, request: EnqueueRequest) -> EnqueueEstimate:
    """The estimate before Mark All (docs/concepts.md): rows, tokens, cost, ETA and the caps
    that would stop the run; writes nothing.

    A row is expected to use what the assignment's recent rows used, else its
    pool's recent assignments, else a default (aiqueue_estimate).  On the batch
    lane (asked for, or the kind's default) it is priced at the pool's batch price.
    """
    money = rt.settings.money
    kind = _declared_kind(rt, request.kind)
    batch = overnight.lane_of(rt, request) == "batch"
    pool = rt.settings.queue.pool_of(request.kind)
    d = await rt.store.dry_run(request.submission_ids, request.assignment_id,
                               group=request.group or request.assignment_id,
                               remark=request.remark, pool=pool.name, money=money,
                               kind=request.kind, payload=request.payload,
                               answer_key=answer_key(rt, request, kind),
                               lane="batch" if batch else "live")
    if d.unknown_ids:
        raise _unknown_ids(d.unknown_ids)
    row_cost = d.batch_row_cost_usd if batch else d.row_cost_usd
    first = min(request.calibrate.rows or len(request.calibrate.submission_ids or ()), d.rows) \
        if request.calibrate else 0
    # Calibration rows go live (the teacher is waiting for them); the rest at the lane's price.
    parts = [_part(d, first, d.row_cost_usd), _part(d, d.rows - first, row_cost)]
    costs = [p.estimated_cost_usd for p in parts]
    cost = None if None in costs else round(sum(c or 0 for c in costs), 6)
    eta = await _eta(rt, request, kind, d.ahead, first if request.calibrate else d.rows,
                     batch and not request.calibrate)
    return EnqueueEstimate(
        rows=d.rows, already_marked=d.already_marked, same_answers=d.same_answers,
        estimated_tokens=round(d.rows * (d.prompt_tokens + d.completion_tokens)),
        estimated_cost_usd=cost, eta_seconds=eta,
        capped=would_stop(money.pool(pool.name), d, cost),
        **({"calibration": parts[0], "rest": parts[1]} if request.calibrate else {}))


async def _eta(rt: Runtime, request: EnqueueRequest, kind: Kind, ahead: int, rows: int,
               batch: bool) -> float | None:
    """The dry run's ETA (docs/concepts.md#an-estimate-first): the `rows` that run now
    (a calibration's first rows; the rest wait for the release), after the pool's rows
    `ahead`, from not_before on, by the lane's deadline on the batch lane; a row's time
    is the kind's recent marks', else its expected_seconds, else unknown."""
    now = datetime.now(UTC)
    if batch:
        due = request.deadline or now + overnight.DEFAULT_DEADLINE
        return run_eta(ahead, rows, 0, None, by=(due - now).total_seconds())
    avg = await rt.store.recent_processing_seconds(request.kind) if rows else None
    if avg is None:
        avg = kind.expected_seconds
    wait = (request.not_before - now).total_seconds() if request.not_before else 0.0
    cap = rt.settings.queue.pools[kind.pool].max_in_flight
    return run_eta(ahead, rows, cap, avg, wait=wait)


def _part(d: DryRun, rows: int, row_cost: float | None) -> EstimatePart:
    """A part of the dry run's rows (: the calibration rows, the rest), priced alone."""
    return EstimatePart(rows=rows, estimated_tokens=round(rows * (d.prompt_tokens
                                                                  + d.completion_tokens)),
                        estimated_cost_usd=0.0 if rows == 0 else None if row_cost is None
                        else round(rows * row_cost, 6))


def would_stop(pool: PoolMoney, d: DryRun, cost: float | None) -> SpendCaps | None:
    """The caps this run's estimated cost would reach, on top of this window's spend."""
    if cost is None:
        return None
    spent = {"group_usd_per_hour": d.group_hour, "group_usd_per_day": d.group_day,
             "pool_usd_per_day": d.pool_day}
    stops = {name: cap for name, cap in pool.caps.items()
             if cap is not None and spent[name] + cost > cap}
    # Only the caps it would reach are set, so only they are sent.
    return SpendCaps(**stops) if stops else None
