"""Typed rows that leave the store; nothing above it sees a driver record.

queue.py: the queue's own rows; reads.py: what pages and streams read;
review.py: applied results, usage and counters.  Import them from here.
"""

from aiqueue.models.queue import (
    STATUSES,
    Attempt,
    Control,
    Enqueued,
    EnqueueOutcome,
    Job,
    KeyMismatch,
    PageCursor,
    QueueId,
    QueueRow,
    Replayed,
    Row,
    Stats,
    Status,
    SubmissionId,
    UnknownIds,
)
from aiqueue.models.reads import (
    AssignmentInfo,
    EventBatch,
    EventCursor,
    MarkingEvent,
    RunProgress,
    SubmissionResult,
    SubmissionStatus,
)
from aiqueue.models.review import AppliedResult, Review, ReviewOutcome, TallyRow, UsageRow

__all__ = [
    "STATUSES", "AppliedResult", "AssignmentInfo", "Attempt", "Control", "EnqueueOutcome",
    "Enqueued", "EventBatch", "EventCursor", "Job", "KeyMismatch", "MarkingEvent", "PageCursor",
    "QueueId", "QueueRow", "Replayed", "Review", "ReviewOutcome", "Row", "RunProgress", "Stats",
    "Status", "SubmissionId", "SubmissionResult", "SubmissionStatus", "TallyRow", "UnknownIds",
    "UsageRow",
]
