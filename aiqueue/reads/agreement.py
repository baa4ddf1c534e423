"""Agreement between the AI's marks and the teacher's reviews, as readers ask for it.

The figures are computed in models/agreement.py; this module reads the
reviews (one SQL read, marks only) and shapes the answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

from aiqueue.models.agreement import Agreement, Review, agreement
from aiqueue.models.calibration import Gate
from aiqueue.queue import calibration
from aiqueue.runtime import Runtime
from aiqueue.wire.calibration import AgreementReport

# /ai-queue's window for agreement by model.
MODEL_WINDOW = timedelta(days=30)


async def report(rt: Runtime, *, assignment_id: str | None = None, group: str | None = None,
                 kind: str | None = None, model: str | None = None,
                 since: datetime | None = None) -> AgreementReport:
    """GET /api/marking/agreement's answer."""
    reviews = await rt.store.agreement_reviews(assignment_id=assignment_id, group=group, kind=kind,
                                     model=model, since=since)
    return AgreementReport.of(agreement(review for review, _model in reviews))


async def of_assignment(rt: Runtime, assignment_id: str) -> Agreement:
    """The teacher page's card: every review of the assignment."""
    reviews = await rt.store.agreement_reviews(assignment_id=assignment_id)
    return agreement(review for review, _model in reviews)


async def by_model(rt: Runtime, now: datetime | None = None) -> list[tuple[str, Agreement]]:
    """/ai-queue's table: agreement per model over the reviews of the last 30 days."""
    since = (now or datetime.now(UTC)) - MODEL_WINDOW
    per: dict[str, list[Review]] = {}
    for review, model in await rt.store.agreement_reviews(since=since):
        per.setdefault(model or "unknown", []).append(review)
    return [(model, agreement(rows)) for model, rows in sorted(per.items())]


@dataclass(frozen=True)
class Card:
    """The teacher page's agreement card: the run's gate (if any), the figures, why rows wait."""

    gate: Gate | None
    figures: Agreement
    why: str | None = None


async def card(rt: Runtime, assignment_id: str, run_id: UUID | None) -> Card:
    """While a calibrated run holds rows: its calibration rows' agreement and what the rest
    wait for; otherwise the assignment's agreement over every review."""
    gate = await rt.store.calibration_gate(run_id) if run_id is not None else None
    if gate is not None and gate.held:
        figures = await calibration.measured(rt, gate.run_id)
        return Card(gate, figures, calibration.why_waiting(gate, figures))
    return Card(gate, await of_assignment(rt, assignment_id))
