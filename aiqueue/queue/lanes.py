"""What an enqueue's kind decides when the request does not: its lane (CONTRACT §9f) and
whether the same answers share a mark (§10c)."""

from __future__ import annotations

from aiqueue.answers import AnswerKey
from aiqueue.errors import Invalid
from aiqueue.runtime import Runtime
from aiqueue.settings.kinds import Lane
from aiqueue.wire import EnqueueRequest


def lane_of(rt: Runtime, request: EnqueueRequest) -> Lane:
    """The lane the request asks for, else its kind's (`lane` in `[kinds.*]`).

    422 when the batch lane's pool declares no batch API, or a deadline comes
    with the live lane.  The kind must be known (the caller checks it first).
    """
    kind = rt.settings.queue.kind(request.kind)
    lane = request.lane or kind.lane
    if lane == "live" and request.deadline is not None:
        raise Invalid(f'deadline is for "lane": "batch" only; kind {kind.name!r} takes the '
                      "live lane")
    if lane == "batch" and rt.settings.queue.pools[kind.pool].batch is None:
        raise Invalid(f'lane "batch" needs a pool with a batch API: kind {kind.name!r} is in '
                      f"pool {kind.pool!r}, which declares none (pools.{kind.pool}.batch in "
                      "aiqueue.toml)", extra={"pool": kind.pool})
    return lane


def answer_key(rt: Runtime, request: EnqueueRequest) -> AnswerKey | None:
    """The key that groups the same answers (`same_answers`: the request's, else its kind's,
    else mark_once); None: each answer is marked on its own (mark_each)."""
    same = request.same_answers or rt.settings.queue.kind(request.kind).same_answers
    return rt.tokens.answer_key if same == "mark_once" else None
