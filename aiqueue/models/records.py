"""A school's data: what retention, erasure, export and replay return."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, ClassVar

from aiqueue.models.queue import Row


@dataclass(frozen=True)
class Retained:
    """What one retention pass removed (ran: False when another pass ran this minute)."""

    ran: bool
    ended: int
    results: int
    attempts: int

    @classmethod
    def from_row(cls, row: Row) -> Retained:
        return cls(bool(row["ran"]), int(row["ended"]), int(row["results"]),
                   int(row["attempts"]))

    @property
    def total(self) -> int:
        return self.ended + self.results + self.attempts


@dataclass(frozen=True)
class Partitioned:
    """What one pass over the month partitions did: months created ahead, months dropped."""

    created: int
    dropped: int


@dataclass(frozen=True)
class ReplayFilter:
    """Which failed rows a replay moves; None in a field means any."""

    assignment_id: str | None = None
    group: str | None = None
    kind: str | None = None
    error: str | None = None
    failed_after: datetime | None = None
    failed_before: datetime | None = None

    def args(self) -> tuple[Any, ...]:
        return (self.assignment_id, self.group, self.kind, self.error, self.failed_after,
                self.failed_before)


@dataclass(frozen=True)
class ReplayOutcome:
    """Failed rows that matched, those a replay moves (eligible) and those it moved."""

    matched: int
    eligible: int
    replayed: int
    dry_run: bool

    @classmethod
    def from_row(cls, row: Row, dry_run: bool) -> ReplayOutcome:
        return cls(int(row["matched"]), int(row["eligible"]), int(row["replayed"]), dry_run)

    def answer(self) -> dict[str, Any]:
        """The 200 body: {matched, replayed}, and on a dry run what a replay would move."""
        body: dict[str, Any] = {"matched": self.matched, "replayed": self.replayed}
        if self.dry_run:
            body.update(dry_run=True, would_replay=self.eligible)
        return body


def _number(value: Decimal | float | int | None) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True)
class ExportLine:
    """One line of the export: an attempt or an applied result, content-free unless asked.

    COLUMNS is the CSV header and the JSONL keys, in order; `feedback` is
    added only when the export includes it.
    """

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "record", "queue_id", "submission_id", "assignment_id", "group", "kind", "attempt",
        "at", "ended_at", "outcome", "error", "actor", "model", "prompt_tokens",
        "completion_tokens", "cost_usd", "processing_seconds", "score", "max_score",
        "adjusted_score", "review",
        # The audit record of a result (docs/remark.md): what it was marked under, by
        # what, and when a teacher reviewed it (`actor`: who).
        "payload_version", "function_version", "provider", "reviewed_at",
    )

    key: int  # the keyset cursor: attempt id or result seq
    fields: dict[str, Any]

    @classmethod
    def attempt(cls, row: Row) -> ExportLine:
        return cls(int(row["id"]), {
            "record": "attempt", "queue_id": str(row["queue_id"]),
            "submission_id": str(row["submission_id"]), "assignment_id": row["assignment_id"],
            "group": row["group_key"], "kind": row["kind"], "attempt": row["attempt"],
            "at": _iso(row["started_at"]), "ended_at": _iso(row["ended_at"]),
            "outcome": row["outcome"], "error": row["error"], "actor": row["actor"],
            "model": row["model"], "prompt_tokens": row["prompt_tokens"],
            "completion_tokens": row["completion_tokens"], "cost_usd": _number(row["cost_usd"]),
        })

    @classmethod
    def result(cls, row: Row) -> ExportLine:
        fields = {
            "record": "result", "queue_id": str(row["queue_id"]),
            "submission_id": str(row["submission_id"]), "assignment_id": row["assignment_id"],
            "group": row["group_key"], "at": _iso(row["applied_at"]),
            # "recorded": made under an older payload than the mark it found, not applied
            "outcome": "applied" if row["applied"] else "recorded",
            "actor": row["actor"], "model": row["model"],
            "prompt_tokens": row["prompt_tokens"], "completion_tokens": row["completion_tokens"],
            "cost_usd": _number(row["cost_usd"]),
            "processing_seconds": _number(row["processing_seconds"]),
            "score": _number(row["score"]), "max_score": _number(row["max_score"]),
            "adjusted_score": _number(row["adjusted_score"]), "review": row["review"],
            "payload_version": row["payload_version"],
            "function_version": row["function_version"], "provider": row["provider"],
            "reviewed_at": _iso(row["reviewed_at"]),
        }
        if row["feedback"] is not None:
            fields["feedback"] = row["feedback"]
        return cls(int(row["seq"]), fields)


@dataclass(frozen=True)
class MonthsAhead:
    """One partitioned history table, as the doctor sees it (docs/operating/data-protection.md)."""

    table: str
    ready: bool  # a partition holds next month
    months: int  # its partitions, the default not counted
    default_rows: int  # about how many rows no month took

    @classmethod
    def from_row(cls, row: Row) -> MonthsAhead:
        return cls(row["parent"], bool(row["ready"]), int(row["months"]),
                   int(row["default_rows"]))


@dataclass(frozen=True)
class TableHealth:
    """Dead rows and heap-only (HOT) updates of one table, from pg_stat_user_tables."""

    table: str
    live: int
    dead: int
    updates: int
    hot_updates: int
    bytes: int

    @classmethod
    def from_row(cls, row: Row) -> TableHealth:
        return cls(row["relname"], int(row["live"]), int(row["dead"]), int(row["updates"]),
                   int(row["hot_updates"]), int(row["bytes"]))

    @property
    def dead_share(self) -> float:
        """Dead rows as a share of all the table's rows (0 when it has none)."""
        total = self.live + self.dead
        return self.dead / total if total else 0.0

    @property
    def hot_share(self) -> float | None:
        """The share of updates that were heap-only; None before any update."""
        return self.hot_updates / self.updates if self.updates else None


@dataclass(frozen=True)
class HostFill:
    """The host's submissions: its fillfactor and its updates, all and heap-only."""

    fillfactor: int
    updates: int
    hot_updates: int

    @classmethod
    def from_row(cls, row: Row) -> HostFill:
        return cls(int(row["fillfactor"]), int(row["updates"]), int(row["hot_updates"]))
