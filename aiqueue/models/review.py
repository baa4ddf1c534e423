"""Applied results and their review, usage and the never-decreasing counters."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from aiqueue.models.queue import QueueId, Row

Review = Literal["unreviewed", "accepted", "reverted"]


@dataclass(frozen=True)
class ReviewOutcome:
    """What one accept or revert did: accepted/reverted/superseded/not_completed/not_found."""

    outcome: str
    at: datetime | None

    @classmethod
    def from_row(cls, row: Row) -> ReviewOutcome:
        return cls(row["outcome"], row["at"])


@dataclass(frozen=True)
class RowResult:
    """The status of a row's applied result, never its content."""

    review: Review
    applied_at: datetime
    model: str | None
    kind: str | None
    superseded: bool
    payload_version: str | None = None

    @classmethod
    def from_row(cls, row: Row) -> RowResult:
        return cls(row["review"], row["applied_at"], row["model"], row["kind"],
                   row["superseded"], row["payload_version"])


@dataclass(frozen=True)
class AppliedResult:
    """One applied result of a submission and its review."""

    queue_id: QueueId
    applied_at: datetime
    result: dict[str, Any]
    review: Review
    accepted_at: datetime | None
    reverted_at: datetime | None
    actor: str | None
    adjusted_result: dict[str, Any] | None
    # What it was marked under, and whether it became the mark (docs/remark.md).
    payload_version: str | None = None
    applied: bool = True

    @classmethod
    def from_row(cls, row: Row) -> AppliedResult:
        fields = {name: row[name] for name in cls.__dataclass_fields__}
        fields["result"] = json.loads(row["result"])
        fields["adjusted_result"] = (json.loads(row["adjusted_result"])
                                     if row["adjusted_result"] else None)
        return cls(**fields)


@dataclass(frozen=True)
class UsageRow:
    """Usage of applied results under one key (None: the total)."""

    key: str | None
    jobs: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    unpriced_jobs: int
    avg_seconds: float | None
    p95_seconds: float | None
    # The provider's prompt cache: input tokens read and written, and what it saved.
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_saved_tokens: int = 0
    cache_saved_usd: float | None = None

    @classmethod
    def from_row(cls, row: Row) -> UsageRow:
        fields = {name: row[name] for name in cls.__dataclass_fields__}
        fields["key"] = None if row["is_total"] else row["key"]
        return cls(**fields)


@dataclass(frozen=True)
class UsageCard:
    """/ai-queue's cost card: today's and the 30 days' totals, the 30 days by model and by lane.

    No processing times (the card shows none): its lines are UsageRows without them.
    """

    today: UsageRow
    month: UsageRow
    by_model: list[UsageRow]
    by_lane: list[UsageRow]

    @classmethod
    def from_rows(cls, rows: list[Row]) -> UsageCard:
        parts: dict[str, list[UsageRow]] = {"today": [], "month": [], "model": [], "lane": []}
        for r in rows:
            key = None if r["part"] in ("today", "month") else r["key"]
            fields = {name: r[name] for name in UsageRow.__dataclass_fields__
                      if name not in ("key", "avg_seconds", "p95_seconds")}
            parts[r["part"]].append(UsageRow(key=key, avg_seconds=None, p95_seconds=None,
                                             **fields))
        return cls(parts["today"][0], parts["month"][0], parts["model"], parts["lane"])


@dataclass(frozen=True)
class TallyRow:
    """Summed counter deltas for one (outcome, job, error, model, bucket)."""

    outcome: str
    job: str | None
    error: str | None
    model: str | None
    le: float | None
    n: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    seconds: float

    @classmethod
    def from_row(cls, row: Row) -> TallyRow:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class CacheCounter:
    """A pool's prompt cache counters (docs/prompt-cache.md): tokens read and written, USD saved."""

    pool: str
    read_tokens: int
    write_tokens: int
    saved_usd: float

    @classmethod
    def from_row(cls, row: Row) -> CacheCounter:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})
