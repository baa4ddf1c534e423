"""The calibration gate and agreement: one method per named query of sql/calibration.sql."""

from __future__ import annotations

import json
from datetime import datetime
from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.models.agreement import Review
from aiqueue.models.calibration import Gate, Release, Thresholds

# The most reviews one agreement reads (a school's classes are far fewer).
MAX_REVIEWS = 100_000


class CalibrationQueries(Gateway):
    """Release a run's held rows, read its gate, sweep for readiness; read reviews."""

    async def calibration_release(self, run_id: UUID, actor: str | None) -> Release:
        rows = await self._write("calibration_release", run_id, actor)
        r = rows[0]  # an aggregate: always one row
        return Release(int(r["released"]), r["released_at"], bool(r["known"]))

    async def calibration_gate(self, run_id: UUID) -> Gate | None:
        row = await self._fetchrow("calibration_gate", run_id)
        return Gate.from_row(row) if row else None

    async def calibration_sweep(self) -> list[tuple[UUID, Thresholds]]:
        """Write late calibration_ready events; the gated runs thresholds may release."""
        rows = await self._write("calibration_sweep")
        found = [(r["run_id"], Thresholds.of(r["release_when"])) for r in rows]
        return [(run, t) for run, t in found if t is not None]

    async def agreement_reviews(self, *, assignment_id: str | None = None, group: str | None = None,
                      kind: str | None = None, model: str | None = None,
                      since: datetime | None = None, run_id: UUID | None = None,
                      calibration_only: bool = False) -> list[tuple[Review, str | None]]:
        """Reviewed results (marks only, no text) with their model, in applied order."""
        rows = await self._fetch("agreement_reviews", assignment_id, group, kind, model, since,
                                 run_id, calibration_only, MAX_REVIEWS, page=True)
        return [(Review(r["queue_id"], r["review"], json.loads(r["result"]),
                        json.loads(r["adjusted"]) if r["adjusted"] is not None else None,
                        r["submission_id"]), r["model"]) for r in rows]
