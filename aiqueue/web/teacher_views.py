"""What the teacher's results page shows: pure helpers that turn rows and progress into words.

The handlers (teacher_page.py) hand these the typed rows and progress the rules
return; the tests call them directly, as PgQueuer's tests call its fmt_age.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from aiqueue.models import Status, SubmissionResult
from aiqueue.web.estimate import paused_text
from aiqueue.web.views.text import shown
from aiqueue.wire import answers, dump

# A row held for its run's calibration (docs/agreement.md): it waits for the teacher, not the queue.
HELD_LABEL = "after your check"
STATUS_LABELS: dict[Status, str] = {
    "pending": "queued", "processing": "marking…", "completed": "marked",
    "failed": "failed", "cancelled": "cancelled", "expired": "expired",
}


def fmt_eta(seconds: float | None) -> str:
    if seconds is None:
        return "estimating time left"
    if seconds < 60:
        return "less than a minute left"
    return f"about {round(seconds / 60)} min left"


def fmt_duration(seconds: float) -> str:
    """'under a minute', 'about 12 min', 'about 3 h'."""
    if seconds < 60:
        return "under a minute"
    if seconds < 5400:
        return f"about {round(seconds / 60)} min"
    return f"about {round(seconds / 3600)} h"


def fmt_by(when: datetime) -> str:
    """'Tue 14:00 CET': when an overnight run is due, where the school is."""
    return shown(when).strftime("%a %H:%M %Z")


def fmt_number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def mark_text(result: dict[str, Any] | None) -> str:
    """'7 / 10' for a stored AI result, '' when there is none."""
    if not result or result.get("score") is None:
        return ""
    text = fmt_number(result["score"])
    if result.get("max_score") is not None:
        text += f" / {fmt_number(result['max_score'])}"
    return text


def usage_text(p: answers.RunProgress) -> str:
    """'2,431 tokens · $0.0123' for the run ('' before any result; cost unknown: said so)."""
    if not p.tokens and not p.cost_usd and not p.unpriced_jobs:
        return ""
    text = f"{p.tokens:,} tokens"
    if p.cost_usd is not None:
        text += f" · ${p.cost_usd:.4f}"
    if p.unpriced_jobs:
        text += f" ({p.unpriced_jobs} without a known price)"
    return text


def review_text(p: answers.RunProgress) -> str:
    """'2 accepted, 1 reverted, 5 to review' over the run's applied results."""
    r = p.review
    if r is None:
        return ""
    parts = [f"{n} {label}" for n, label in ((r.accepted, "accepted"),
             (r.reverted, "reverted"), (r.unreviewed, "to review")) if n]
    return ", ".join(parts)


def progress_view(p: answers.RunProgress) -> dict[str, Any]:
    """The progress bar: percent finished and '23 of 48 marked — about 2 min left'.

    The run's answer as the API sends it, with the page's words beside it.
    """
    body = dump(p)
    finished = p.completed + p.failed + p.cancelled + p.expired
    active = p.pending + p.processing > 0
    paused = paused_text(p.resumes_at, p.paused_by)
    extra = {"usage_text": usage_text(p), "review_text": review_text(p), "paused": bool(paused)}
    if p.total == 0:
        return {**body, **extra, "percent": 0, "active": False, "text": "Not marked yet."}
    text = f"{p.completed} of {p.total} marked"
    extras = [f"{n} {k}" for k, n in (("failed", p.failed), ("cancelled", p.cancelled),
                                       ("expired", p.expired)) if n]
    if extras:
        text += f" ({', '.join(extras)})"
    if paused:
        text += f" — {paused}"
    if p.scheduled:
        text += f" — {scheduled_text(p.scheduled, p.scheduled_for)}"
    elif active:
        text += f" — {fmt_eta(p.estimated_remaining_seconds)}"
    return {**body, **extra, "percent": math.floor(100 * finished / p.total),
            "active": active, "text": text}


def scheduled_text(n: int, at: datetime | None) -> str:
    """'12 scheduled for 2026-11-27 16:00 UTC' (the page turns the time into local time)."""
    if at is None:
        return f"{n} scheduled"
    return f"{n} scheduled for {at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def row_view(row: SubmissionResult) -> dict[str, Any]:
    status = row.queue_status
    if status == "completed" or (status is None and row.ai_result):
        label = ""
    else:
        label = STATUS_LABELS[status] if status else "not marked"
        if row.held:
            label = HELD_LABEL
    adjusted = mark_text(row.adjusted_result)
    return {
        "id": str(row.submission_id),
        "name": row.student_name or f"Submission {str(row.submission_id)[:8]}",
        "content": row.content,
        "mark": mark_text(row.ai_result),
        "adjusted": adjusted,
        "review": row.review or "",
        "reviewable": row.result_queue_id is not None,
        "progress": progress_message(row.progress) if status == "processing" else "",
        "feedback": (row.ai_result or {}).get("feedback") or "",
        "status": status or "none",
        "label": label,
        "marked": row.ai_marked_at is not None or row.ai_result is not None,
        "same_answer": same_answer_text(row.same_answers),
        **remarked_view(row.ai_result, row.previous_result, row.older_rubric),
    }


def remarked_view(result: dict[str, Any] | None, previous: dict[str, Any] | None,
                  older: bool) -> dict[str, str]:
    """A re-marked row's words (docs/remark.md): 're-marked: 6 → 7', the previous mark
    and its feedback one click away, or 'marked under an earlier rubric'."""
    before = mark_text(previous)
    now = fmt_number(result["score"]) if result and result.get("score") is not None else ""
    then = fmt_number(previous["score"]) if previous and previous.get("score") is not None \
        else ""
    return {
        "remarked": "" if not (then and now) else f"re-marked: {then} → {now}" if then != now
        else f"re-marked: {now}, unchanged",
        "previous": f"Before: {before}" + (f". {previous['feedback']}"
                                           if previous and previous.get("feedback") else "")
                    if before else "",
        "older_rubric": "marked under an earlier rubric" if older else "",
    }


def remark_button_text(enqueued: int, cost_usd: float | None) -> str:
    """'Re-mark what changed (27 answers · about $0.11)' ('' when nothing changed)."""
    if enqueued <= 0:
        return ""
    answers_text = f"{enqueued} answer{'s' if enqueued != 1 else ''}"
    cost = "" if cost_usd is None else f" · about ${cost_usd:.2f}"
    return f"Re-mark what changed ({answers_text}{cost})"


def same_answer_text(others: int) -> str:
    """'same answer as 3 others': the submissions marked once with this one."""
    if others <= 0:
        return ""
    return f"same answer as {others} other{'s' if others != 1 else ''}"


MARK_TITLE = "Mark this submission with AI"
# "Check 5 first" (docs/agreement.md): the rows marked before the rest are released.
CHECK_FIRST = 5
REMARK_TITLE = "This submission already has an AI mark: mark it again, replacing that mark"


def progress_message(item: dict[str, Any] | None) -> str:
    """'criterion 2 of 5 (2/5)' from a progress item; '' without one."""
    if not item:
        return ""
    message = str(item.get("message") or "")[:200]
    current, total = item.get("current"), item.get("total")
    if isinstance(current, int) and isinstance(total, int) and total > 0:
        return f"{message} ({current}/{total})" if message else f"{current}/{total}"
    return message


def page_url(assignment_id: str) -> str:
    return f"/results/assignments/{quote(assignment_id, safe='')}"
