"""A typed async client for aiqueue's marking API (httpx), with resumable live events."""

from aiqueue_client.client import AsyncMarkingClient
from aiqueue_client.errors import MarkingError
from aiqueue_client.notifications import (
    AlertOpened,
    AlertResolved,
    BadSignature,
    BudgetWarning,
    CalibrationReady,
    Notification,
    ReviewNeeded,
    RowExpired,
    RowFailed,
    RunFinished,
    verify_notification,
)
from aiqueue_client.sync import call
from aiqueue_client.types import (
    Accepted,
    AgreementReport,
    CanaryRun,
    CanaryRuns,
    Clarified,
    EnqueueAccepted,
    Enqueued,
    EnqueueEstimate,
    Erased,
    HeldResults,
    MarkingEvent,
    Released,
    RemarkAccepted,
    RemarkEstimate,
    ReplayAnswer,
    ResultHistory,
    Reverted,
    RowDetail,
    RunAccepted,
    RunProgress,
    RunReverted,
    SubmissionStatus,
    UsageReport,
)

__all__ = [
    "AlertOpened", "AlertResolved", "BudgetWarning", "CalibrationReady", "Notification",
    "ReviewNeeded", "RowExpired", "RowFailed", "RunFinished",
    "Accepted", "AgreementReport", "AsyncMarkingClient", "BadSignature", "CanaryRun",
    "CanaryRuns", "Clarified", "EnqueueAccepted", "EnqueueEstimate", "Enqueued", "Erased",
    "HeldResults", "MarkingError", "MarkingEvent", "Released", "RemarkAccepted",
    "RemarkEstimate", "ReplayAnswer", "ResultHistory", "Reverted", "RowDetail", "RunAccepted",
    "RunProgress", "RunReverted", "SubmissionStatus", "UsageReport",
    "call", "verify_notification",
]
