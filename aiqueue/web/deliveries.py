"""Pure view helper for the notifications panel of /ai-queue (ids and codes, never content)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from aiqueue.models import OutboxEntry
from aiqueue.web.views import fmt_age, fmt_time


@dataclass(frozen=True)
class DeliveryLine:
    """One event waiting or given up, as the panel shows it."""

    event_id: str
    type: str
    assignment_id: str
    queue_id: str
    state: str
    attempts: int
    created: str
    when: str
    last_outcome: str


@dataclass(frozen=True)
class Panel:
    """The panel: whether notifications are on, the counts, the newest lines."""

    enabled: bool
    waiting: int
    gave_up: int
    lines: list[DeliveryLine]


def when_text(e: OutboxEntry, now: datetime) -> str:
    """'next try in 25s' / 'due now' while waiting; 'gave up 3m 4s ago' after."""
    if e.state == "gave_up":
        return f"gave up {fmt_age((now - (e.last_at or e.created_at)).total_seconds())} ago"
    wait = (e.next_at - now).total_seconds()
    return f"next try in {fmt_age(wait)}" if wait > 0 else "due now"


def panel(entries: list[OutboxEntry], now: datetime, *, enabled: bool) -> Panel:
    """Counts per state (of all such events) and one line per listed event."""
    counts = {e.state: e.of_state for e in entries}
    lines = [DeliveryLine(
        event_id=str(e.event_id), type=e.type, assignment_id=e.assignment_id,
        queue_id=str(e.queue_id) if e.queue_id else "", state=e.state.replace("_", " "),
        attempts=e.attempts, created=fmt_time(e.created_at), when=when_text(e, now),
        last_outcome=e.last_outcome or "not tried yet",
    ) for e in entries]
    return Panel(enabled, counts.get("waiting", 0), counts.get("gave_up", 0), lines)
