"""How long the queue keeps each kind of row; the pruning runs in the housekeeping."""

from __future__ import annotations

from dataclasses import dataclass

from aiqueue.settings import Settings

# The pruning itself runs in the process step's housekeeping, beside the prune
# of completed rows (queue loop -> Store.retain, sql/records.sql retain):
# at most once a minute across instances, at most 5,000 rows of each kind a pass.


@dataclass(frozen=True)
class Kept:
    """One line of "what is kept, for how long" (the /ai-queue panel; the docs' Data
    protection page)."""

    what: str
    where: str
    days: float | None  # None: not by age (see `note`)
    note: str = ""


def periods(s: Settings) -> list[Kept]:
    """Every kind of data the queue holds and its retention, from the settings."""
    return [
        Kept("completed rows and their attempt history", "ai_marking_queue, ai_marking_attempts",
             s.prune_after_days, "QUEUE_PRUNE_AFTER_DAYS"),
        Kept("failed, cancelled and expired rows and their attempt history",
             "ai_marking_queue, ai_marking_attempts", s.retain_ended_days,
             "QUEUE_RETAIN_ENDED_DAYS"),
        Kept("applied results (marks, feedback, review, tokens, cost)", "ai_marking_results",
             s.retain_history_days, "QUEUE_RETAIN_HISTORY_DAYS"),
        Kept("attempt history of rows still kept", "ai_marking_attempts",
             s.retain_history_days, "QUEUE_RETAIN_HISTORY_DAYS"),
        Kept("live-event feed", "ai_marking_events", 1.0),
        Kept("Idempotency-Key answers", "ai_marking_idempotency", 1.0),
        Kept("notifications delivered or given up", "ai_marking_outbox", s.prune_after_days,
             "QUEUE_PRUNE_AFTER_DAYS; undelivered ones for the 24 h retry window"),
        Kept("enqueue payloads (rubrics)", "ai_marking_payloads", None,
             "while a kept row names one, then 1 hour"),
        Kept("erasure records (hashes and counts, no content)", "ai_marking_erasures", None,
             "kept: the proof of each erasure"),
    ]

