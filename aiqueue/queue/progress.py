"""Queue position, ETA and run progress: what a waiting teacher wants to know."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any
from uuid import UUID

from aiqueue.errors import NotFound
from aiqueue.models import RunProgress, SubmissionStatus
from aiqueue.runtime import Runtime
from aiqueue.wire import answers


def eta_seconds(rows_before: int, cap: int, avg: float | None) -> float | None:
    """Seconds until a row has its result when `rows_before` rows hold or take slots first.

    Rows go through `cap` slots (0 = unlimited) in rounds of about `avg` seconds.
    """
    if avg is None:
        return None
    slots = cap if cap > 0 else rows_before + 1
    return round(math.ceil((rows_before + 1) / slots) * avg, 1)


def run_eta(ahead: int, rows: int, cap: int, avg: float | None, wait: float = 0.0,
            by: float | None = None) -> float | None:
    """Seconds until the last of `rows` new rows has its result
    (docs/concepts.md#an-estimate-first).

    `ahead`: the pool's rows due now or at its function; `wait`: seconds until the
    rows' not_before (those ahead are done by then); `by`: on the batch lane, seconds
    to its deadline (the lane's promise).  None: no recent mark and no expectation.
    """
    if rows <= 0:
        return 0.0
    if by is not None:
        return round(max(by, 0.0), 1)
    if wait > 0:
        own = eta_seconds(rows - 1, cap, avg)
        return None if own is None else round(wait + own, 1)
    return eta_seconds(ahead + rows - 1, cap, avg)


def status_json(st: SubmissionStatus, cap: int, avg: float | None) -> answers.SubmissionStatus:
    """The contract's body for /api/marking/submissions/<id>/status."""
    position: int | None = None
    wait: float | None = None
    if st.status == "pending" and not st.held:  # held (docs/agreement.md): no place in line yet
        position = (st.ahead or 0) + 1
        wait = eta_seconds(position - 1 + st.in_flight, cap, avg)
    elif st.status == "processing":
        position = 0
        if avg is not None:
            wait = round(max(avg - (st.running_seconds or 0.0), 0.0), 1)
    # `progress` is sent only while processing: set only then (dump leaves unset fields out).
    # The store's review is checked text; the type checks it is one of the three.
    fields: dict[str, Any] = {"review": st.review, **paused(st.resumes_at, st.paused_by)}
    if st.same_answer_as is not None and fields["waiting_for"] is None:
        # It is marked when its leader is (docs/same-answer.md).
        fields.update(waiting_for="same_answer", same_answer_as=st.same_answer_as)
    if st.status == "processing":
        fields["progress"] = progress_item(st.progress)
    if st.held:
        fields["waiting_for"] = "calibration"
    return answers.SubmissionStatus(
        queue_id=st.queue_id, status=st.status, attempts=st.attempts,
        queue_position=position, estimated_wait_seconds=wait,
        scheduled_for=st.scheduled_for, lane=st.lane,
        deadline=st.deadline if st.lane == "batch" else None, **fields)


def paused(resumes_at: datetime | None, cap: str | None) -> dict[str, Any]:
    """waiting_for and resumes_at (docs/concepts.md): rows paused at a spend cap, and until when."""
    return {"waiting_for": "spend_cap" if resumes_at else None,
            "resumes_at": resumes_at, "paused_by": cap if resumes_at else None}


def progress_item(item: dict[str, Any] | None) -> answers.ProgressItem | None:
    """The contract's fields of a progress item (current, total, message), or None."""
    if not item:
        return None
    return answers.ProgressItem.model_validate(
        {key: item.get(key) for key in ("current", "total", "message")})


def remaining_seconds(p: RunProgress, cap: int, avg: float | None) -> float | None:
    """About how long until the run's last row has its result (0 when nothing is left)."""
    if p.pending and p.last_position is not None:
        return eta_seconds(p.last_position - 1 + p.in_flight, cap, avg)
    if p.processing:
        if avg is None:
            return None
        return round(max(avg - (p.youngest_running_seconds or 0.0), 0.0), 1)
    return 0.0


def progress_json(p: RunProgress, cap: int, avg: float | None) -> answers.RunProgress:
    """The contract's body for /api/marking/assignments/<id>/progress."""
    return answers.RunProgress(
        run_id=p.run_id, total=p.total, pending=p.pending, processing=p.processing,
        completed=p.completed, failed=p.failed, cancelled=p.cancelled, expired=p.expired,
        scheduled=p.scheduled, scheduled_for=p.scheduled_for,
        estimated_remaining_seconds=remaining_seconds(p, cap, avg),
        tokens=p.prompt_tokens + p.completion_tokens, prompt_tokens=p.prompt_tokens,
        completion_tokens=p.completion_tokens,
        cost_usd=None if p.cost_usd is None else round(p.cost_usd, 6),
        unpriced_jobs=p.unpriced_jobs,
        review=answers.ReviewCounts(accepted=p.accepted, reverted=p.reverted,
                                    unreviewed=p.unreviewed),
        lane="batch" if p.batch else "live", batch=p.batch, deadline=p.deadline,
        **paused(p.resumes_at if p.pending else None, p.paused_by))


async def submission_status(rt: Runtime, submission_id: UUID) -> answers.SubmissionStatus:
    """Status, queue position and ETA of a submission's latest row; NotFound if never enqueued."""
    st = await rt.store.submission_status(submission_id)
    if st is None:
        raise NotFound(f"submission {submission_id} was never enqueued")
    avg = await rt.store.recent_processing_seconds() if st.status in ("pending", "processing") \
        else None
    return status_json(st, rt.settings.max_in_flight, avg)


async def assignment_progress(rt: Runtime, assignment_id: str) -> answers.RunProgress:
    """Counts and ETA over the assignment's latest run (all zero if it never ran)."""
    p = await rt.store.run_progress(assignment_id)
    avg = await rt.store.recent_processing_seconds() if p.pending or p.processing else None
    return progress_json(p, rt.settings.max_in_flight, avg)
