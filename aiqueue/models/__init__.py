"""Typed rows that leave the store; nothing above it sees a driver record.

queue.py: the queue's own rows; enqueue.py: what an enqueue did or would do;
reads.py: what pages and streams read; review.py: applied results, usage and
counters; security.py: the lockdown check's rows; outbox.py: notifications;
alerts.py: open alerts.  Import them from here.
"""

from aiqueue.models.alerts import ALERTS, AlertName, NearCap, OpenAlert
from aiqueue.models.enqueue import (
    DryRun,
    Enqueued,
    EnqueueOutcome,
    KeyMismatch,
    Replayed,
    UnknownIds,
)
from aiqueue.models.outbox import Delivery, DeliveryState, EventId, EventType, OutboxEntry
from aiqueue.models.queue import (
    STATUSES,
    Attempt,
    Completed,
    Control,
    Job,
    Lookup,
    PageCursor,
    QueueId,
    QueueRow,
    Row,
    Stats,
    Status,
    SubmissionId,
)
from aiqueue.models.reads import (
    AssignmentInfo,
    EventBatch,
    EventCursor,
    MarkingEvent,
    RowWait,
    RunProgress,
    SubmissionResult,
    SubmissionStatus,
)
from aiqueue.models.review import (
    AppliedResult,
    CacheCounter,
    Review,
    ReviewOutcome,
    RowResult,
    TallyRow,
    UsageCard,
    UsageRow,
)
from aiqueue.models.security import ANY_ROLE, AppRole, Exposure, ObjectKind, Reader

__all__ = [
    "CacheCounter",
    "ANY_ROLE", "AppRole", "STATUSES", "AppliedResult", "AssignmentInfo", "Attempt", "Control",
    "Completed", "DryRun", "EnqueueOutcome", "Enqueued", "EventBatch", "EventCursor", "Exposure",
    "Job",
    "KeyMismatch", "Lookup", "MarkingEvent", "ObjectKind", "PageCursor", "QueueId", "QueueRow",
    "Reader", "Replayed", "Review", "ReviewOutcome", "Row", "RowResult", "RunProgress", "Stats",
    "RowWait", "Status", "SubmissionId", "SubmissionResult", "SubmissionStatus", "TallyRow",
    "UnknownIds", "UsageCard", "UsageRow",
    "Delivery", "DeliveryState", "EventId", "EventType", "OutboxEntry",
    "ALERTS", "AlertName", "NearCap", "OpenAlert",
]
