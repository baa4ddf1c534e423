"""Alerts (CONTRACT §9d, §10d): an open incident, as /ai-queue shows it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from aiqueue.models.queue import Row

AlertName = Literal["backlog_age", "stalled", "failure_spike", "latency"]
ALERTS: tuple[AlertName, ...] = ("backlog_age", "stalled", "failure_spike", "latency")


@dataclass(frozen=True)
class OpenAlert:
    """An alert that fired and has not resolved yet."""

    alert: AlertName
    pool: str
    kind: str | None
    value: float
    threshold: float
    opened_at: datetime

    @classmethod
    def from_row(cls, row: Row) -> OpenAlert:
        return cls(row["alert"], row["pool"], row["kind"], float(row["value"]),
                   float(row["threshold"]), row["opened_at"])
