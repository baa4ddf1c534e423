"""What the operator's /ai-queue page reads and does, over the store.

The page's handlers (web/monitor_page.py) call these and never the store: the
queries behind the table, chart and row history, and the operator's actions,
each logged with its reason and never with content.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from aiqueue import logs
from aiqueue.db.doctor import code_schema_version
from aiqueue.errors import SchemaBehind, StoreError
from aiqueue.models import Attempt, Control, PageCursor, QueueRow, Status
from aiqueue.runtime import Runtime
from aiqueue.wire import reads as shapes


async def page_rows(
    rt: Runtime, *, status: Status | None, assignment_id: str | None, limit: int,
    after: PageCursor | None, before: PageCursor | None, group: str | None = None,
    kind: str | None = None,
) -> tuple[list[QueueRow], bool, bool]:
    """One page of rows, newest first, and whether newer / older pages exist."""
    if before is not None:
        newer = await rt.store.list_rows_newer(
            status=status, assignment_id=assignment_id, before=before, limit=limit + 1,
            group=group, kind=kind)
        if len(newer) > limit:
            return list(reversed(newer[:limit])), True, True
        after = None  # less than a page above the cursor: show the first page
    rows = await rt.store.list_rows(
        status=status, assignment_id=assignment_id, limit=limit + 1, after=after, group=group,
        kind=kind)
    return rows[:limit], after is not None, len(rows) > limit


async def control(rt: Runtime) -> Control:
    """Pause switch, breaker and busy back-off as they stand."""
    return await rt.store.control(rt.settings.breaker_threshold)


async def throughput(rt: Runtime, window_seconds: float, bucket_seconds: float
                     ) -> list[tuple[datetime, int, int]]:
    """(bucket start, completed, failed) over the window."""
    return await rt.store.throughput(window_seconds, bucket_seconds)


async def assignment_ids(rt: Runtime, limit: int) -> list[str]:
    """Assignments with rows, for the filter's list."""
    return await rt.store.assignment_ids(limit)


async def row_with_history(rt: Runtime, queue_id: UUID) -> tuple[QueueRow, list[Attempt]] | None:
    """A row and its attempt history; None when there is no such row."""
    row = await rt.store.get_row(queue_id)
    if row is None:
        return None
    return row, await rt.store.attempts_of(queue_id)


async def cancel_row(rt: Runtime, queue_id: UUID, actor: str) -> bool:
    """A pending row becomes cancelled; False when it was not pending."""
    done = await rt.store.cancel_row(queue_id, actor)
    if done:
        logs.event("operator", reason="cancel", queue_id=queue_id)
    return done


async def cancel_pending(rt: Runtime, assignment_id: str, actor: str) -> int:
    """An assignment's pending rows become cancelled; how many."""
    n = await rt.store.cancel_assignment(assignment_id, actor)
    logs.event("operator", reason="cancel_assignment", assignment_id=assignment_id, count=n)
    return n


async def set_paused(rt: Runtime, paused: bool, actor: str) -> None:
    """Pause or resume dispatching for every instance."""
    await rt.store.set_paused(paused, actor)
    logs.event("operator", reason="pause" if paused else "resume")


@dataclass(frozen=True)
class Health:
    """The bearer's /healthz answer: the database and the schema (CONTRACT §9a)."""

    http_status: int
    body: shapes.Health
    retry_after: int | None = None


def unavailable(expected: int | None = None) -> shapes.Health:
    return shapes.Health(status="unavailable", database=False, schema=shapes.SchemaVersions(
        expected=expected or code_schema_version(), found=None))


async def health(rt: Runtime) -> Health:
    """Does the database answer, and is its schema the one this code needs?"""
    expected = code_schema_version()
    try:
        found = await rt.store.schema_version()
    except StoreError:
        return Health(503, unavailable(expected))
    schema = shapes.SchemaVersions(expected=expected, found=found)
    # found None: this role may not read the migrations (no check rather than no service).
    if found is not None and found < expected:
        behind = SchemaBehind(expected, found)
        return Health(503, shapes.Health(
            status="schema_behind", database=True, schema=schema, error="schema_behind",
            detail=behind.detail, expected=expected, found=found), behind.retry_after)
    return Health(200, shapes.Health(status="ok", database=True, schema=schema))


# The /ai-queue login throttle: failed logins per client address within the
# window before every attempt is refused.  Counted in the database, so every
# instance (serverless ones too) sees the same failures.
LOGIN_FAILURE_LIMIT, LOGIN_FAILURE_WINDOW_SECONDS = 5, 300.0


async def login_blocked(rt: Runtime, client: str) -> bool:
    """Whether `client` used up its failed logins for now."""
    return await rt.store.login_blocked(client, LOGIN_FAILURE_WINDOW_SECONDS,
                                        LOGIN_FAILURE_LIMIT)


async def login_failed(rt: Runtime, client: str) -> None:
    """Count a failed login of `client`."""
    await rt.store.login_failed(client, LOGIN_FAILURE_WINDOW_SECONDS)
    logs.event("login_failed", reason="wrong_password")
