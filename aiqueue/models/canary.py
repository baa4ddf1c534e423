"""Drift canaries (docs/canaries.md): a canary run and a row to send, as the store gives them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from aiqueue.models.queue import Row

Trigger = Literal["schedule", "model_change", "manual"]
RunState = Literal["running", "finished", "skipped"]


@dataclass(frozen=True)
class CanaryRun:
    """One canary run of a kind: what started it, what it found, whether it passed."""

    run_id: UUID
    kind: str
    pool: str
    trigger: Trigger
    lane: str
    state: RunState
    started_at: datetime
    finished_at: datetime | None = None
    skipped: str | None = None
    model: str | None = None
    function_version: str | None = None
    trigger_model: str | None = None
    trigger_version: str | None = None
    rows: int = 0
    answered: int = 0
    exact: float | None = None
    qwk: float | None = None
    yardstick_exact: float | None = None
    yardstick_qwk: float | None = None
    cost_usd: float | None = None
    passed: bool | None = None
    accepted_at: datetime | None = None
    # Only from canary_latest: when the kind's open drift alert opened (None: none).
    drift_since: datetime | None = None

    @classmethod
    def from_row(cls, row: Row) -> CanaryRun:
        keys = row.keys()
        return cls(
            run_id=row["run_id"], kind=row["kind"], pool=row["pool"], trigger=row["trigger"],
            lane=row["lane"], state=row["state"], started_at=row["started_at"],
            finished_at=row["finished_at"], skipped=row["skipped"], model=row["model"],
            function_version=row["function_version"], trigger_model=row["trigger_model"],
            trigger_version=row["trigger_version"], rows=row["rows"],
            answered=row["answered"], exact=row["exact"], qwk=row["qwk"],
            yardstick_exact=row["yardstick_exact"], yardstick_qwk=row["yardstick_qwk"],
            cost_usd=row["cost_usd"], passed=row["passed"], accepted_at=row["accepted_at"],
            drift_since=row["drift_since"] if "drift_since" in keys else None)

    @property
    def pair(self) -> tuple[str | None, str | None]:
        """The model and function version it marked with (or was started for)."""
        return (self.model or self.trigger_model, self.function_version or self.trigger_version)


@dataclass(frozen=True)
class CanaryJob:
    """A canary row to send: a reviewed submission under its own payload."""

    id: UUID
    run_id: UUID
    submission_id: UUID
    assignment_id: str
    payload_json: str
    content: str

    @classmethod
    def from_row(cls, row: Row) -> CanaryJob:
        return cls(row["id"], row["run_id"], row["submission_id"], row["assignment_id"],
                   row["payload"], row["content"])


@dataclass(frozen=True)
class CanaryMarks:
    """An answered canary row: its marks and the teacher's (scores only)."""

    id: UUID
    marks: dict[str, Any]
    teacher: dict[str, Any]
    model: str | None
    function_version: str | None

    @classmethod
    def from_row(cls, row: Row) -> CanaryMarks:
        return cls(row["id"], json.loads(row["marks"] or "{}"), json.loads(row["teacher"]),
                   row["model"], row["function_version"])


@dataclass(frozen=True)
class CanaryBatch:
    """A batch-lane canary's work at the provider: its run, and its batch as recorded."""

    run_id: UUID
    kind: str
    pool: str
    running: bool
    state: str | None  # None (not packed), submitting, submitted, deleting
    tag: str | None
    batch_id: str | None
    files: tuple[str, ...]
    since: datetime | None
    rows: int = 0

    @classmethod
    def from_row(cls, row: Row) -> CanaryBatch:
        return cls(row["run_id"], row["kind"], row["pool"], row["state"] == "running",
                   row["batch_state"], row["batch_tag"], row["batch_id"],
                   tuple(row["batch_files"] or ()), row["batch_at"], row["rows"])
