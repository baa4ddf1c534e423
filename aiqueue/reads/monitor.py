"""What the operator's /ai-queue page and the JSON API's row list read, over the store.

The page's handlers (web/monitor_page.py) call these and never the store: the
queries behind the table, chart and row history (its actions are queue/actions.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from aiqueue.db.doctor import code_schema_version
from aiqueue.errors import SchemaBehind, StoreError
from aiqueue.models import Attempt, PageCursor, QueueRow, Status
from aiqueue.runtime import Runtime
from aiqueue.wire import reads as shapes


async def page_rows(
    rt: Runtime, *, status: Status | None, assignment_id: str | None, limit: int,
    after: PageCursor | None, before: PageCursor | None, group: str | None = None,
    kind: str | None = None,
) -> tuple[list[QueueRow], bool, bool]:
    """One page of rows, newest first, and whether newer / older pages exist."""
    if before is not None:
        newer = await rt.store.monitor_rows_newer(
            status=status, assignment_id=assignment_id, before=before, limit=limit + 1,
            group=group, kind=kind)
        if len(newer) > limit:
            return list(reversed(newer[:limit])), True, True
        after = None  # less than a page above the cursor: show the first page
    rows = await rt.store.list_rows(
        status=status, assignment_id=assignment_id, limit=limit + 1, after=after, group=group,
        kind=kind)
    return rows[:limit], after is not None, len(rows) > limit


async def throughput(rt: Runtime, window_seconds: float, bucket_seconds: float
                     ) -> list[tuple[datetime, int, int]]:
    """(bucket start, completed, failed) over the window."""
    return await rt.store.monitor_throughput(window_seconds, bucket_seconds)


async def assignment_ids(rt: Runtime, limit: int) -> list[str]:
    """Assignments with rows, for the filter's list."""
    return await rt.store.monitor_assignments(limit)


async def row_with_history(rt: Runtime, queue_id: UUID) -> tuple[QueueRow, list[Attempt]] | None:
    """A row and its attempt history; None when there is no such row."""
    row = await rt.store.get_row(queue_id)
    if row is None:
        return None
    return row, await rt.store.attempts_of(queue_id)


@dataclass(frozen=True)
class Health:
    """The bearer's /healthz answer: the database and the schema (docs/deploying/index.md)."""

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


async def list_rows(
    rt: Runtime, *, status: Status | None, assignment_id: str | None, limit: int, offset: int,
    group: str | None = None, kind: str | None = None,
) -> tuple[list[QueueRow], int]:
    """One page of rows by offset, and how many rows match (the JSON API's list)."""
    rows = await rt.store.list_rows(
        status=status, assignment_id=assignment_id, limit=limit, offset=offset, group=group,
        kind=kind,
    )
    total = await rt.store.count_rows(status=status, assignment_id=assignment_id, group=group,
                                      kind=kind)
    return rows, total
