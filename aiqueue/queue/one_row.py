"""One row from the outside: its detail, an operator's cancel and fail.

Each action is logged with its reason and the row's id, never with the note
(an operator's words may name a student) or any content.
"""

from __future__ import annotations

from uuid import UUID

from aiqueue import logs
from aiqueue.errors import Conflict, NotFound
from aiqueue.runtime import Runtime
from aiqueue.wire.answers import RowDetail


async def detail(rt: Runtime, queue_id: UUID) -> RowDetail:
    """The row as the queue list shows it, its attempts and its result's status; 404 if none."""
    row = await rt.store.get_row(queue_id)
    if row is None:
        raise NotFound(f"no queue row {queue_id}")
    history = await rt.store.attempts_of(queue_id)
    return RowDetail.of_parts(row, history, await rt.store.row_result(queue_id),
                              await rt.store.row_payload_version(queue_id))


async def _ended(rt: Runtime, queue_id: UUID, action: str) -> Conflict:
    row = await rt.store.get_row(queue_id)
    if row is None:
        raise NotFound(f"no queue row {queue_id}")
    return Conflict(f"only a {action}; this row is {row.status}")


async def cancel(rt: Runtime, queue_id: UUID, actor: str) -> RowDetail:
    """A pending or processing row becomes cancelled (a late result is refused); 409 once ended."""
    was = await rt.store.cancel_one(queue_id, actor)
    if was is None:
        raise await _ended(rt, queue_id, "pending or processing row can be cancelled")
    logs.event("operator", reason="cancel", queue_id=queue_id, status=was)
    return await detail(rt, queue_id)


async def fail(rt: Runtime, queue_id: UUID, note: str, actor: str) -> RowDetail:
    """A pending row ends as failed with last_error "operator", the note in its history on
    /ai-queue only; 409 when not pending."""
    if not await rt.store.fail_one(queue_id, note, actor):
        raise await _ended(rt, queue_id, "pending row can be failed by an operator")
    logs.event("operator", reason="fail", queue_id=queue_id)
    return await detail(rt, queue_id)
