"""The teacher's results page: what it shows (its buttons' actions are queue/actions.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from aiqueue.batch.pack import live_estimate
from aiqueue.errors import NotFound
from aiqueue.models import AssignmentInfo, EventCursor, SubmissionResult
from aiqueue.queue import overnight, progress
from aiqueue.runtime import Runtime
from aiqueue.settings.kinds import DEFAULT_KIND
from aiqueue.wire import answers

MAX_ROWS = 2000


@dataclass(frozen=True)
class ResultsPage:
    """Everything the results template renders."""

    assignment_id: str
    info: AssignmentInfo | None
    rows: list[SubmissionResult]
    progress: answers.RunProgress
    cursor: EventCursor


async def load(rt: Runtime, assignment_id: str) -> ResultsPage:
    """The page's data; NotFound when the assignment has neither submissions nor a rubric."""
    # The feed position first: any change committed after it is replayed to the
    # page's event stream, so nothing between this read and the stream is missed.
    cursor = await rt.store.live_events_head()
    info = await rt.store.assignment_info(assignment_id)
    rows = await rt.store.submission_results(assignment_id, MAX_ROWS)
    if info is None and not rows:
        raise NotFound(f"no assignment {assignment_id!r}")
    run = await progress.assignment_progress(rt, assignment_id)
    return ResultsPage(assignment_id, info, rows, run, cursor)


async def info(rt: Runtime, assignment_id: str) -> AssignmentInfo | None:
    """The assignment's stored title and payload (question, rubric, max_score)."""
    return await rt.store.assignment_info(assignment_id)


@dataclass(frozen=True)
class MarkChoices:
    """The two ways to mark the class and what each is expected to take."""

    live_seconds: float
    # "Mark overnight" (None: the pool has no batch API): done by this time, at this share
    # of the live price.
    overnight_by: datetime | None
    overnight_price: float


async def mark_choices(rt: Runtime, unmarked: int) -> MarkChoices:
    """Estimates for Mark All (live) and Mark overnight (the batch lane), beside each other."""
    per_row = await rt.store.batch_live_seconds() or overnight.DEFAULT_LIVE_SECONDS
    live = live_estimate(unmarked, per_row, rt.settings.max_in_flight)
    # The page marks the default kind: its pool's batch API, if it declares one.
    pool = rt.settings.queue.pool_of(DEFAULT_KIND)
    if pool.batch is None:
        return MarkChoices(live, None, 1.0)
    return MarkChoices(live, datetime.now(UTC) + overnight.DEFAULT_DEADLINE,
                       overnight.price_share(rt, pool.name))


async def submission(rt: Runtime, assignment_id: str,
                     submission_id: UUID) -> tuple[dict[str, Any], SubmissionResult]:
    """One row's mark and feedback, for the page to show a result as it arrives (and the
    row, which the page puts into words)."""
    row = await rt.store.submission_result(submission_id, assignment_id)
    if row is None:
        raise NotFound(f"no submission {submission_id} in this assignment")
    return _submission_json(row), row


def max_attempts(rt: Runtime, kind: str) -> int:
    """The attempts a row of `kind` gets (the kind's own, else QUEUE_MAX_ATTEMPTS)."""
    declared = rt.settings.queue.kinds.get(kind)
    own = declared.max_attempts if declared is not None else None
    return own or rt.settings.max_attempts


def _submission_json(row: SubmissionResult) -> dict[str, Any]:
    result = row.ai_result or {}
    adjusted = row.adjusted_result or {}
    return {
        "submission_id": str(row.submission_id),
        "status": row.queue_status,
        "score": result.get("score"),
        "max_score": result.get("max_score"),
        "feedback": result.get("feedback"),
        "review": row.review,
        "adjusted_score": adjusted.get("score"),
        "progress": _progress_item(row.progress),
        "previous_result": row.previous_result,
        "older_rubric": row.older_rubric,
    }


def _progress_item(item: dict[str, Any] | None) -> dict[str, Any] | None:
    # As the function sent it (an int stays an int): the page shows it as is.
    if not item:
        return None
    return {key: item.get(key) for key in ("current", "total", "message")}
