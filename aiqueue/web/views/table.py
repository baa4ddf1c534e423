"""The queue table's rows and a row's history, as the page prints them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from aiqueue.models import Attempt, QueueRow
from aiqueue.web.views.text import fmt_age, fmt_duration, fmt_time

# -- the queue table --------------------------------------------------------


@dataclass(frozen=True)
class TableRow:
    """One queue row as the table prints it: identifiers, status, timings, error code."""

    queue_id: str
    submission_id: str
    assignment_id: str
    group: str
    kind: str
    status: str
    attempts: str
    age: str
    processing: str
    last_error: str
    can_retry: bool
    can_cancel: bool
    # A pending row paused at a spend cap (docs/concepts.md): 'paused: budget until 14:00 UTC'.
    waiting: str = ""
    # "scheduled for …" while a pending row waits for its not_before (docs/operating/alerts.md).
    scheduled: str = ""
    # The lane it is marked on (docs/overnight.md), and on the batch lane its deadline.
    lane: str = "live"
    deadline: str = ""
    # The row whose mark this one copies (the same answer, docs/same-answer.md), else "".
    same_answer_as: str = ""


def waiting_text(row: QueueRow) -> str:
    """Why a pending row is not dispatched yet, in words ('' when nothing holds it)."""
    if row.resumes_at is not None:
        return f"paused: budget until {row.resumes_at.astimezone(UTC):%H:%M} UTC"
    if row.same_answer_as is not None and row.status == "pending":
        return f"same answer as row {str(row.same_answer_as)[:8]}: its mark"
    return ""


def processing_seconds(row: QueueRow, now: datetime) -> float | None:
    """Dispatch to end for finished rows, dispatch to now while processing."""
    if row.started_at is None:
        return None
    if row.status == "processing":
        return (now - row.started_at).total_seconds()
    if row.status in ("completed", "failed") and row.finished_at is not None:
        return (row.finished_at - row.started_at).total_seconds()
    return None


def table_row(row: QueueRow, now: datetime, max_attempts: int) -> TableRow:
    return TableRow(
        queue_id=str(row.queue_id),
        submission_id=str(row.submission_id),
        assignment_id=row.assignment_id,
        group=row.group_key,
        kind=row.kind,
        status=row.status,
        attempts=f"{row.attempts}/{max_attempts}",
        age=fmt_age((now - row.created_at).total_seconds()),
        processing=fmt_duration(processing_seconds(row, now)),
        last_error=row.last_error or "",
        can_retry=row.status == "failed",
        can_cancel=row.status == "pending",
        waiting=waiting_text(row),
        scheduled=fmt_scheduled(row.scheduled_for(now)),
        lane=row.lane,
        deadline=fmt_time(row.deadline) if row.lane == "batch" and row.deadline else "",
        same_answer_as=str(row.same_answer_as or ""),
    )


def fmt_scheduled(at: datetime | None) -> str:
    return f"scheduled for {fmt_time(at)}" if at else ""


def row_times(row: QueueRow) -> dict[str, str]:
    """The row's timestamps, formatted, for the detail page."""
    return {"created": fmt_time(row.created_at), "updated": fmt_time(row.updated_at),
            "started": fmt_time(row.started_at), "finished": fmt_time(row.finished_at)}


@dataclass(frozen=True)
class HistoryEntry:
    """One line of a row's history: a dispatch and how it ended, or an operator action."""

    kind: str
    attempt: str
    started: str
    ended: str
    outcome: str
    duration: str
    error: str
    model: str
    tokens: str
    actor: str
    ref: str
    # What the platform said about the invocation (docs/guarantees.md), or "".
    platform: str = ""
    # An operator's note on the action (this page only), or "".
    note: str = ""


# The attempt's `platform` note, as the history shows it.
PLATFORM_SAID = {
    "still_running": "still running (no activation record yet)",
    "applied_from_activation": "applied from the activation",
    "activation_failed": "activation failed",
    "timed_out": "timed out",
    "lookup_failed": "platform not reachable; asking again",
}


def history_entry(a: Attempt) -> HistoryEntry:
    """Format an attempt; of its usage only the model name and token counts are shown."""
    usage = a.usage or {}
    model = usage.get("model")
    counts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens")]
    tokens = " + ".join(str(c) for c in counts if isinstance(c, int)) if any(
        isinstance(c, int) for c in counts) else ""
    total = usage.get("total_tokens")
    if not tokens and isinstance(total, int):
        tokens = str(total)
    if a.kind == "action":
        outcome = a.outcome or ""
    else:
        outcome = a.outcome or ("in flight" if a.ended_at is None else "")
    duration = (a.ended_at - a.started_at).total_seconds() if a.ended_at else None
    return HistoryEntry(
        kind=a.kind,
        attempt=str(a.attempt) if a.kind == "dispatch" else "",
        started=fmt_time(a.started_at),
        ended=fmt_time(a.ended_at) if a.kind == "dispatch" else "",
        outcome=outcome,
        duration=fmt_duration(duration) if a.kind == "dispatch" else "",
        error=a.error or "",
        model=model[:100] if isinstance(model, str) else "",
        tokens=tokens,
        actor=a.actor or "",
        ref=a.dispatch_ref or "",
        platform=PLATFORM_SAID.get(a.platform or "", ""),
        note=a.note or "",
    )
