"""Which lane an enqueue takes (CONTRACT §9f): the one it names, else its kind's default."""

from __future__ import annotations

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
