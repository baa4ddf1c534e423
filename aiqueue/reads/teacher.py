"""The teacher's results page: what it shows and the marking actions behind its buttons.

This is the worked example of a teacher-facing app on aiqueue: it calls the same
queue functions (queue/enqueue.py) the JSON API does, with the assignment's stored payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from aiqueue import wire
from aiqueue.batch.lane import live_estimate
from aiqueue.errors import Conflict, Invalid, NotCompleted, NotFound
from aiqueue.models import AssignmentInfo, EventCursor, SubmissionResult
from aiqueue.queue import enqueue, overnight, progress, review, spend
from aiqueue.runtime import Runtime
from aiqueue.settings.kinds import DEFAULT_KIND, Lane
from aiqueue.wire import answers
from aiqueue.wire.calibration import Calibrate

MAX_ROWS = 2000
# One row the teacher is waiting on goes ahead of a class-wide run.
SINGLE_ROW_PRIORITY = 10


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
    cursor = await rt.store.events_head()
    info = await rt.store.assignment_info(assignment_id)
    rows = await rt.store.submission_results(assignment_id, MAX_ROWS)
    if info is None and not rows:
        raise NotFound(f"no assignment {assignment_id!r}")
    run = await progress.assignment_progress(rt, assignment_id)
    return ResultsPage(assignment_id, info, rows, run, cursor)


async def info(rt: Runtime, assignment_id: str) -> AssignmentInfo | None:
    """The assignment's stored title and payload (question, rubric, max_score)."""
    return await rt.store.assignment_info(assignment_id)


async def mark(rt: Runtime, assignment_id: str, submission_id: UUID | None,
               remark: bool = False, lane: Lane = "live",
               not_before: datetime | None = None,
               calibrate: int | None = None) -> answers.EnqueueAccepted:
    """Enqueue one submission, or the class: without `remark` only what has no AI mark yet.

    `lane="batch"` is "Mark overnight": the pool's batch API, half price, by the
    default deadline (24 h).  With `not_before` ("Mark at …") the rows wait until
    then (CONTRACT §9d).  With `calibrate` ("Check 5 first") that many go first and the
    rest wait for the teacher's release (§10b).
    """
    request = await _request(rt, assignment_id, submission_id, remark, lane, not_before,
                             calibrate=calibrate)
    if not request.submission_ids:
        return answers.EnqueueAccepted(enqueued=0, skipped=0, already_marked=0, queue_ids=[])
    answer, _ = await enqueue.enqueue(rt, request)
    return answer


async def estimate(rt: Runtime, assignment_id: str, submission_id: UUID | None,
                   remark: bool = False, calibrate: int | None = None
                   ) -> answers.EnqueueEstimate:
    """What `mark` would add and use (CONTRACT §9c); writes nothing."""
    request = await _request(rt, assignment_id, submission_id, remark, dry_run=True,
                             calibrate=calibrate)
    return await spend.dry_run(rt, request)


async def _request(rt: Runtime, assignment_id: str, submission_id: UUID | None, remark: bool,
                   lane: Lane = "live", not_before: datetime | None = None,
                   dry_run: bool = False, calibrate: int | None = None) -> wire.EnqueueRequest:
    info = await rt.store.assignment_info(assignment_id)
    if info is None:
        raise Conflict("this assignment has no marking payload (rubric, max_score) yet")
    if submission_id is not None:
        if await rt.store.submission_result(submission_id, assignment_id) is None:
            raise NotFound(f"no submission {submission_id} in this assignment")
        ids, priority = [submission_id], SINGLE_ROW_PRIORITY
    elif remark:
        rows = await rt.store.submission_results(assignment_id, wire.MAX_IDS)
        ids, priority = [r.submission_id for r in rows], 0
    else:
        ids, priority = list(await rt.store.unmarked_submissions(assignment_id, wire.MAX_IDS)), 0
    return wire.EnqueueRequest(assignment_id, ids, priority, wire.payload_json(info.payload),
                               remark=remark, lane=lane, not_before=not_before,
                               dry_run=dry_run,
                               calibrate=Calibrate(rows=calibrate) if calibrate else None)


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


async def submission(rt: Runtime, assignment_id: str, submission_id: UUID) -> dict[str, Any]:
    """One row's mark and feedback, for the page to show a result as it arrives."""
    row = await rt.store.submission_result(submission_id, assignment_id)
    if row is None:
        raise NotFound(f"no submission {submission_id} in this assignment")
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
    }


def _progress_item(item: dict[str, Any] | None) -> dict[str, Any] | None:
    # As the function sent it (an int stays an int): the page shows it as is.
    if not item:
        return None
    return {key: item.get(key) for key in ("current", "total", "message")}


def adjusted_result(raw: str | None, ai_result: dict[str, Any] | None) -> dict[str, Any] | None:
    """The teacher's score from the Adjust field as a result beside the AI's (None: none)."""
    if raw is None or not raw.strip():
        return None
    try:
        score = float(raw)
    except ValueError:
        raise Invalid("the adjusted score must be a number") from None
    top = (ai_result or {}).get("max_score")
    if not 0 <= score <= (top if isinstance(top, (int, float)) else float("inf")):
        raise Invalid(f"the adjusted score must be between 0 and {top}")
    adjusted: dict[str, Any] = {"score": int(score) if score.is_integer() else score}
    if isinstance(top, (int, float)):
        adjusted["max_score"] = top
    return adjusted


async def review_row(rt: Runtime, assignment_id: str, submission_id: UUID, action: str,
                     actor: str, score: str | None = None) -> answers.Accepted | answers.Reverted:
    """Accept (or adjust) or revert the result a submission's mark shows."""
    row = await rt.store.submission_result(submission_id, assignment_id)
    if row is None:
        raise NotFound(f"no submission {submission_id} in this assignment")
    if row.result_queue_id is None:
        raise NotCompleted("this submission has no AI mark to review")
    if action == "revert":
        return await review.revert(rt, row.result_queue_id, actor)
    adjusted = adjusted_result(score, row.ai_result)
    return await review.accept(rt, row.result_queue_id, actor, adjusted)
