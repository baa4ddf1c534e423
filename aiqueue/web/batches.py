"""Pure view helper for the Batches card of /ai-queue (ids, counts and times, never content)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from aiqueue.models.batch import OpenBatch
from aiqueue.web.views import fmt_age, fmt_time

# What each state means to an operator.
STATES = {
    "submitting": "being sent",
    "submitted": "at the provider",
    "cancelling": "cancelling (rows go live)",
    "ended": "applied; deleting at the provider",
    "clearing": "not sent; deleting what the provider may keep",
}


@dataclass(frozen=True)
class BatchLine:
    """One open batch, as the card shows it."""

    id: int
    pool: str
    provider: str
    state: str
    state_text: str
    rows: int
    unresolved: int
    age: str
    deadline: str
    deadline_in: str


@dataclass(frozen=True)
class Card:
    """The card: whether any pool has a batch API, and one line per open batch."""

    enabled: bool
    lines: list[BatchLine]


def card(batches: list[OpenBatch], now: datetime, *, enabled: bool) -> Card:
    return Card(enabled, [_line(b, now) for b in batches])


def _line(b: OpenBatch, now: datetime) -> BatchLine:
    if b.deadline is None:
        deadline, deadline_in = "—", ""
    else:
        left = (b.deadline - now).total_seconds()
        deadline = fmt_time(b.deadline)
        deadline_in = f"in {fmt_age(left)}" if left > 0 else f"{fmt_age(-left)} ago"
    return BatchLine(
        id=b.id, pool=b.pool, provider=b.provider, state=b.state,
        state_text=STATES.get(b.state, b.state), rows=b.rows, unresolved=b.unresolved,
        age=fmt_age((now - b.created_at).total_seconds()), deadline=deadline,
        deadline_in=deadline_in)
