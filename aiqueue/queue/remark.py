"""A rubric changes: re-mark only what it changed, once, without blanking a mark
(docs/remark.md).

`remark` is the one entry: a new payload becomes the assignment's current one,
and the submissions whose applied mark was made under another payload are
enqueued again under it, in one transaction (db/remark.py):
- reviewed marks (accepted or adjusted) are kept unless `include_reviewed`;
- rows not yet dispatched that an edit enqueued within `debounce_seconds` under
  another payload end cancelled, last_error "superseded", using no attempt;
- a mark stays until a result under the current payload replaces it, and a late
  result under an older payload is recorded, never applied over a newer one
  (db/sql/functions/77_remark.sql).
`only` limits it to some submissions (a clarification re-marks the rows that
asked); `estimate` is the dry run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from aiqueue import logs
from aiqueue.models.remark import Remarked
from aiqueue.queue.enqueue import answer_key, dry_run
from aiqueue.runtime import Runtime
from aiqueue.wire import EnqueueRequest
from aiqueue.wire.remark import DEFAULT_DEBOUNCE_SECONDS, RemarkAccepted, RemarkEstimate


@dataclass(frozen=True)
class Remark:
    """A validated re-mark: the assignment, its new payload (compact JSON text) and how."""

    assignment_id: str
    payload: str
    include_reviewed: bool = False
    debounce_seconds: float = DEFAULT_DEBOUNCE_SECONDS


async def remark(rt: Runtime, request: Remark, *, only: Sequence[UUID] | None = None,
                 actor: str = "api") -> Remarked:
    """Make `request.payload` the assignment's current payload and re-mark what it changed."""
    defaults = await rt.store.remark_defaults(request.assignment_id)
    shape = _enqueue_shape(request, [], defaults.kind or "mark")
    kind = rt.settings.queue.kind(shape.kind)
    done = await rt.store.remark(
        request.assignment_id, request.payload, include_reviewed=request.include_reviewed,
        debounce_seconds=request.debounce_seconds, defaults=defaults, pool=kind.pool,
        answer_key=answer_key(rt, shape, kind), only=only, actor=actor)
    logs.event("remark", assignment_id=request.assignment_id, enqueued=len(done.queue_ids),
               unchanged=done.plan.unchanged, reviewed_kept=done.plan.reviewed_kept,
               superseded=done.superseded, same_answers=done.same_answers)
    return done


async def current_payload(rt: Runtime, assignment_id: str) -> dict[str, Any] | None:
    """The assignment's current payload: its newest re-mark's, else its newest row's (None:
    none known), to build the next one from (a clarification adds a note to it)."""
    return await rt.store.current_payload(assignment_id)


def accepted(done: Remarked) -> RemarkAccepted:
    """The 202 body of a re-mark."""
    return RemarkAccepted(run_id=done.run_id, enqueued=len(done.queue_ids),
                          unchanged=done.plan.unchanged, reviewed_kept=done.plan.reviewed_kept,
                          same_answers=done.same_answers, superseded=done.superseded)


async def estimate(rt: Runtime, request: Remark,
                   only: Sequence[UUID] | None = None) -> RemarkEstimate:
    """The dry run: the counts and the estimate before Mark All of the rows it would add
    (rows, tokens, cost, ETA, caps; queue/enqueue.py dry_run); writes nothing."""
    plan = await rt.store.remark_plan(request.assignment_id, request.payload,
                                      request.include_reviewed, only)
    defaults = await rt.store.remark_defaults(request.assignment_id)
    shape = _enqueue_shape(request, plan.remark, defaults.kind or "mark", defaults.group)
    e = await dry_run(rt, shape)
    return RemarkEstimate(
        enqueued=e.rows + e.same_answers, unchanged=plan.unchanged,
        reviewed_kept=plan.reviewed_kept, same_answers=e.same_answers, rows=e.rows,
        already_marked=0,
        estimated_tokens=e.estimated_tokens, estimated_cost_usd=e.estimated_cost_usd,
        eta_seconds=e.eta_seconds, capped=e.capped, lane="live")


def _enqueue_shape(request: Remark, ids: Sequence[UUID], kind: str,
                   group: str | None = None) -> EnqueueRequest:
    """The re-mark as the re-marking enqueue of its submissions it amounts to."""
    return EnqueueRequest(request.assignment_id, list(ids), 0, request.payload, group=group,
                          remark=True, kind=kind, lane="live")
