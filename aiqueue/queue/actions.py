"""Operator and teacher writes: retry, cancel, pause, the login throttle, mark and review.

The /ai-queue page's buttons, the JSON API's actions and the teacher page's
buttons call these, never the store; each is logged with its reason and never
with content.  The teacher's page is the worked example of a teacher-facing app
on aiqueue: it calls the same enqueue the JSON API does, with the assignment's
stored payload.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any
from uuid import UUID

from aiqueue import logs, wire
from aiqueue.errors import Conflict, Invalid, NotCompleted, NotFound
from aiqueue.queue import enqueue, review
from aiqueue.runtime import Runtime
from aiqueue.settings.kinds import Lane
from aiqueue.wire import answers, reviews
from aiqueue.wire.answers import RetryAnswer
from aiqueue.wire.calibration import Calibrate

# One row the teacher is waiting on goes ahead of a class-wide run.
SINGLE_ROW_PRIORITY = 10


async def retry_row(rt: Runtime, queue_id: UUID, actor: str) -> RetryAnswer:
    """A failed row becomes pending with fresh attempts."""
    if await rt.store.retry_failed(queue_id, actor):
        logs.event("retry", queue_id=queue_id, reason="manual")
        return RetryAnswer(queue_id=queue_id, status="pending")
    status = await rt.store.row_status(queue_id)
    if status is None:
        raise NotFound(f"no queue row {queue_id}")
    raise Conflict(f"only failed rows can be retried; this row is {status}")


async def cancel_row(rt: Runtime, queue_id: UUID, actor: str) -> bool:
    """A pending row becomes cancelled; False when it was not pending."""
    done = await rt.store.cancel_row(queue_id, actor)
    if done:
        logs.event("operator", reason="cancel", queue_id=queue_id)
    return done


async def cancel_pending(rt: Runtime, assignment_id: str, actor: str) -> int:
    """An assignment's pending rows become cancelled, from the operator's page; how many."""
    n = await rt.store.cancel_assignment(assignment_id, actor)
    logs.event("operator", reason="cancel_assignment", assignment_id=assignment_id, count=n)
    return n


async def cancel_assignment(rt: Runtime, assignment_id: str, actor: str
                            ) -> answers.CancelAnswer:
    """The assignment's pending rows become cancelled, from the API or the teacher's page
    (rows in flight finish)."""
    n = await rt.store.cancel_assignment(assignment_id, actor)
    logs.event("cancel", assignment_id=assignment_id, count=n, reason=actor)
    return answers.CancelAnswer(cancelled=n)


async def set_paused(rt: Runtime, paused: bool, actor: str) -> None:
    """Pause or resume dispatching for every instance."""
    await rt.store.set_paused(paused, actor)
    logs.event("operator", reason="pause" if paused else "resume")


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


async def mark(rt: Runtime, assignment_id: str, submission_id: UUID | None,
               remark: bool = False, lane: Lane = "live",
               not_before: datetime | None = None,
               calibrate: int | None = None) -> answers.EnqueueAccepted:
    """Enqueue one submission, or the class: without `remark` only what has no AI mark yet.

    `lane="batch"` is "Mark overnight": the pool's batch API, half price, by the
    default deadline (24 h).  With `not_before` ("Mark at …") the rows wait until
    then (docs/operating/alerts.md).  With `calibrate` ("Check 5 first") that many go first and the
    rest wait for the teacher's release (docs/agreement.md).
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
    """What `mark` would add and use (docs/concepts.md); writes nothing."""
    request = await _request(rt, assignment_id, submission_id, remark, dry_run=True,
                             calibrate=calibrate)
    return await enqueue.dry_run(rt, request)


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


def adjusted_result(raw: str | None, ai_result: dict[str, Any] | None) -> dict[str, Any] | None:
    """The teacher's score from the Adjust field as a result beside the AI's (None: none)."""
    if raw is None or not raw.strip():
        return None
    try:
        score = float(raw)
    except ValueError:
        raise Invalid("the adjusted score must be a number") from None
    if not math.isfinite(score):  # "inf", "nan", "1e400": no mark, and jsonb holds none
        raise Invalid("the adjusted score must be a number")
    top = (ai_result or {}).get("max_score")
    if not 0 <= score <= (top if isinstance(top, (int, float)) else float("inf")):
        raise Invalid(f"the adjusted score must be between 0 and {top}")
    adjusted: dict[str, Any] = {"score": int(score) if score.is_integer() else score}
    if isinstance(top, (int, float)):
        adjusted["max_score"] = top
    return adjusted


async def review_row(rt: Runtime, assignment_id: str, submission_id: UUID, action: str,
                     actor: str, score: str | None = None) -> reviews.Accepted | reviews.Reverted:
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
