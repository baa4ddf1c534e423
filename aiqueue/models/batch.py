"""The overnight lane's rows: provider batches and the queue rows they hold."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from aiqueue.models.queue import QueueId, Row, SubmissionId, payload_key

BatchState = Literal["submitting", "submitted", "cancelling", "ended", "done", "abandoned",
                     "clearing"]


@dataclass(frozen=True)
class LaneBatch:
    """One provider batch as the lane records it."""

    id: int
    provider: str
    model: str
    provider_batch_id: str | None
    files: tuple[str, ...]
    state: BatchState
    rows: int
    created_at: float
    # what its provider objects are tagged with (aiqueue_batch_tag)
    tag: str = ""
    # why its creation went wrong, if it did (a content-free code)
    error: str | None = None

    @classmethod
    def from_row(cls, row: Row) -> LaneBatch:
        return cls(id=row["id"], provider=row["provider"], model=row["model"],
                   provider_batch_id=row["provider_batch_id"], files=tuple(row["files"] or ()),
                   state=row["state"], rows=row["rows"], created_at=float(row["created_at"]),
                   tag=row["tag"], error=row["error"])


@dataclass(frozen=True)
class OrphanAccount:
    """Open batches of a pool that no longer declares a batch API, and where they live."""

    pool: str
    provider: str
    model: str
    # As recorded when packed; None for a batch packed before they were.
    base_url: str | None
    key_env: str | None
    batches: int

    @classmethod
    def from_row(cls, row: Row) -> OrphanAccount:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class BatchRow:
    """A queue row in a batch: what its line is built from and matched by."""

    batch_id: int
    queue_id: QueueId
    submission_id: SubmissionId
    assignment_id: str
    attempt: int
    dispatch_seq: int
    deadline: datetime | None
    payload: dict[str, Any]
    content: str
    # still in its batch, unresolved (False: fell back, completed, or moved on)
    held: bool = True
    # what the row asks for: its kind's function renders and parses its line
    kind: str = "mark"
    # the row has not ended (False: completed, failed or cancelled since)
    open: bool = True
    # its payload's hash: the provider's prompt cache key (docs/prompt-cache.md)
    cache_key: str = ""

    @property
    def custom_id(self) -> str:
        """`<queue_id>-<dispatch_seq>`: 36 + 1 + a few characters of [a-zA-Z0-9_-]."""
        return f"{self.queue_id}-{self.dispatch_seq}"

    @classmethod
    def from_row(cls, row: Row) -> BatchRow:
        return cls(batch_id=row["batch_id"], queue_id=QueueId(row["queue_id"]),
                   submission_id=SubmissionId(row["submission_id"]),
                   assignment_id=row["assignment_id"], attempt=row["attempts"],
                   dispatch_seq=row["dispatch_seq"], deadline=row["deadline"],
                   payload=json.loads(row["payload"]), content=row["content"],
                   held=bool(row["held"]) if "held" in row.keys() else True,
                   kind=row["kind"] if "kind" in row.keys() else "mark",
                   open=bool(row["open"]) if "open" in row.keys() else True,
                   cache_key=payload_key(row["payload"]))


@dataclass(frozen=True)
class LineFailure:
    """A line that did not give a mark: its row's dispatch and a content-free code."""

    queue_id: QueueId
    dispatch_seq: int
    code: str
    retryable: bool = True


@dataclass(frozen=True)
class OpenBatch:
    """A batch the provider may still keep something of (the Batches card)."""

    id: int
    pool: str
    provider: str
    state: BatchState
    rows: int
    # rows still waiting for its answer, and the nearest of their deadlines
    unresolved: int
    deadline: datetime | None
    created_at: datetime
    error: str | None = None

    @classmethod
    def from_row(cls, row: Row) -> OpenBatch:
        return cls(id=row["id"], pool=row["pool"], provider=row["provider"],
                   state=row["state"], rows=row["rows"], unresolved=row["unresolved"],
                   deadline=row["deadline"], created_at=row["created_at"], error=row["error"])


@dataclass(frozen=True)
class BatchGauges:
    """/metrics' view of the lane: rows by (pool, state), open batches by pool."""

    rows: dict[tuple[str, str], int]
    open: dict[str, int]
