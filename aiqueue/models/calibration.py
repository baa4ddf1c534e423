"""The calibration gate's values (docs/agreement.md): what an enqueue asks for, and a run's gate."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from aiqueue.models.agreement import Agreement
from aiqueue.models.queue import Row

T = TypeVar("T")


@dataclass(frozen=True)
class GateAsked:
    """An enqueue's calibration: `rows` (a spread sample) or `submission_ids`, thresholds."""

    rows: int | None = None
    submission_ids: tuple[str, ...] = ()
    # release_when as JSON text, or None.
    release_when: str | None = None

    @property
    def count(self) -> int:
        return self.rows if self.rows is not None else len(self.submission_ids)


def spread_sample(run_id: UUID, items: Sequence[T], k: int) -> list[T]:
    """k of `items` (in their order) spread over them: one from each of k equal stretches,
    where in its stretch fixed by the run's id (the same run always picks the same rows)."""
    n = len(items)
    if k >= n:
        return list(items)
    picked = []
    for j in range(k):
        start, end = j * n // k, (j + 1) * n // k
        digest = hashlib.sha256(f"{run_id}:{j}".encode()).digest()
        picked.append(items[start + int.from_bytes(digest[:8], "big") % (end - start)])
    return picked


@dataclass(frozen=True)
class Thresholds:
    """release_when: every figure given must be reached."""

    reviewed: int | None = None
    exact: float | None = None
    adjacent: float | None = None

    @classmethod
    def of(cls, text: str | None) -> Thresholds | None:
        if not text:
            return None
        doc: dict[str, Any] = json.loads(text)
        return cls(doc.get("reviewed"), doc.get("exact"), doc.get("adjacent"))

    def unmet(self, a: Agreement) -> list[str]:
        """What keeps the rows waiting, in words (empty: met)."""
        why = []
        if self.reviewed is not None and a.reviewed < self.reviewed:
            why.append(f"{a.reviewed} of {self.reviewed} calibration rows reviewed")
        for name, want, got in (("exact", self.exact, a.exact),
                                ("within the adjacent margin", self.adjacent, a.adjacent)):
            if want is not None and (got is None or got + 1e-12 < want):
                have = "no pairs yet" if got is None else f"{got:.0%}"
                why.append(f"{name}: {have}, needs {want:.0%}")
        return why


@dataclass(frozen=True)
class Gate:
    """A run's calibration gate as stored, with its rows by role."""

    run_id: UUID
    assignment_id: str
    calibration_rows: int
    thresholds: Thresholds | None
    released_at: datetime | None
    released_by: str | None
    ready_at: datetime | None
    calibration: int
    calibration_ended: int
    held: int
    # The run's results' mean cost so far (None: none priced yet).
    row_cost_usd: float | None = None

    @classmethod
    def from_row(cls, row: Row) -> Gate:
        return cls(row["run_id"], row["assignment_id"], int(row["calibration_rows"]),
                   Thresholds.of(row["release_when"]), row["released_at"], row["released_by"],
                   row["ready_at"], int(row["calibration"]), int(row["calibration_ended"]),
                   int(row["held"]), row["row_cost_usd"])


@dataclass(frozen=True)
class Release:
    """A release's outcome: rows freed, when the run was released, whether it has a gate."""

    released: int
    released_at: datetime | None
    known: bool
