"""Alerts: an open incident, and a spend near its cap, as
/ai-queue shows them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from aiqueue.models.queue import Row

AlertName = Literal["backlog_age", "stalled", "failure_spike", "latency", "drift"]
ALERTS: tuple[AlertName, ...] = ("backlog_age", "stalled", "failure_spike", "latency", "drift")


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


@dataclass(frozen=True)
class NearCap:
    """A group (or a pool: group None) whose spend is at 80 % of a cap or more."""

    cap: str
    pool: str
    group: str | None
    spent_usd: float
    limit_usd: float
    window_ends_at: datetime

    @classmethod
    def from_row(cls, row: Row) -> NearCap:
        return cls(row["cap"], row["pool"], row["group_key"], float(row["spent_usd"]),
                   float(row["limit_usd"]), row["window_ends_at"])

    @property
    def share(self) -> float:
        return self.spent_usd / self.limit_usd if self.limit_usd else 0.0
