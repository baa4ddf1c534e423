"""Why a mark waits, and until when, in the teacher's words (the results page).

A pure helper: the page's handler gives it a submission's latest row as the store
read it (models.RowWait), the moment and the row's kind's attempts; the tests call
it directly.  The first reason that holds is the one shown; a row on its second
or later attempt also says which ("attempt 2 of 3").  Times are the school's
(QUEUE_TIMEZONE), as every page shows them.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from aiqueue.models import RowWait, Status
from aiqueue.web.views.text import shown

# A model that refused (429, 503, or an item saying so): the row waits without using
# an attempt (docs/concepts.md, flow control).
BUSY_ERRORS = frozenset({"rate_limited", "overloaded"})
# The function could not be reached or answered 5xx: the marking service is down.
_DOWN = re.compile(r"dispatch_(timeout|connect_error|transport_error|error)|\w+_http_5\d\d")


def at(when: datetime, now: datetime) -> str:
    """'14:05', or 'Tue 14:05' when it is not within the next day."""
    local = shown(when)
    if abs(when - now) < timedelta(hours=20):
        return local.strftime("%H:%M")
    return local.strftime("%a %H:%M")


def attempt_text(status: Status, attempts: int, max_attempts: int) -> str:
    """'attempt 2 of 3' for a row past its first attempt, else ''.

    A processing row is on attempt `attempts`; a pending one that failed before will be
    on the next.
    """
    current = attempts if status == "processing" else attempts + 1
    if current < 2 or status not in ("pending", "processing"):
        return ""
    return f"attempt {min(current, max_attempts)} of {max_attempts}"


def reason(w: RowWait, now: datetime) -> str:
    """Why a pending row is not being marked now, and until when ('' when it is next in
    line and nothing holds it)."""
    if w.resumes_at is not None and w.resumes_at > now:
        return f"paused by a spend cap until {at(w.resumes_at, now)}"
    if w.not_before is not None and w.not_before > now:
        return f"scheduled for {at(w.not_before, now)}"
    if w.copies_leader:
        return "waiting for the same answer: it gets that mark"
    if w.breaker_until is not None and w.breaker_until > now:
        return f"the marking service is down (retrying at {at(w.breaker_until, now)})"
    due = w.run_after if w.run_after is not None and w.run_after > now else None
    if w.last_error in BUSY_ERRORS and due is not None:
        return f"the model is busy (retrying at {at(due, now)})"
    if w.busy_until is not None and w.busy_until > now:
        return f"the model is busy (retrying at {at(w.busy_until, now)})"
    if due is not None and w.last_error and _DOWN.fullmatch(w.last_error):
        return f"the marking service is down (retrying at {at(due, now)})"
    if due is not None and w.last_error:
        return f"the last try failed (retrying at {at(due, now)})"
    if w.lane == "batch":
        by = f", marked by {at(w.deadline, now)}" if w.deadline is not None else ""
        return f"in the overnight batch{by}"
    return ""


def wait_text(status: Status | None, held: bool, w: RowWait | None, now: datetime,
              max_attempts: int) -> str:
    """The line under a mark that is not there yet: the reason and the attempt, joined."""
    if w is None or status not in ("pending", "processing") or held:
        return ""
    parts = [reason(w, now) if status == "pending" else "",
             attempt_text(status, w.attempts, max_attempts)]
    return " · ".join(p for p in parts if p)
