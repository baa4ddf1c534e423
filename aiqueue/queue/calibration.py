"""The calibration gate (docs/agreement.md): a run's first rows are checked before the rest go.

The enqueue marks the calibration rows and holds the rest in its own
transaction (db/enqueue.py); the rest wait until a release: the API's or the
teacher page's, or the run's thresholds (`release_when`) once the teacher's
reviews of the calibration rows meet them.  The figures come from
models/agreement.py, the one place they are computed.
"""

from __future__ import annotations

import json
from uuid import UUID

from aiqueue import logs
from aiqueue.errors import NotFound
from aiqueue.models.agreement import Agreement, agreement
from aiqueue.models.calibration import Gate, GateAsked
from aiqueue.ports import CalibrationStore
from aiqueue.runtime import Runtime
from aiqueue.wire import EnqueueRequest
from aiqueue.wire.calibration import Released

# Who released rows when the thresholds did (recorded as the run's releaser).
BY_THRESHOLDS = "release_when"


def asked(request: EnqueueRequest) -> GateAsked | None:
    """The enqueue's calibration, as the store takes it (None: no gate)."""
    c = request.calibrate
    if c is None:
        return None
    when = request.release_when
    thresholds = json.dumps(when.model_dump(exclude_none=True)) if when else None
    return GateAsked(rows=c.rows, submission_ids=tuple(c.submission_ids or ()),
                     release_when=thresholds)


async def release(rt: Runtime[CalibrationStore], run_id: UUID, actor: str | None) -> Released:
    """Release a run's held rows (none held: 0); NotFound when the run asked for no gate."""
    done = await rt.store.calibration_release(run_id, actor)
    if not done.known:
        raise NotFound(f"no calibrated run {run_id}")
    logs.event("calibration_release", run_id=run_id, released=done.released,
               reason="thresholds" if actor == BY_THRESHOLDS else "asked")
    return Released(run_id=run_id, released=done.released, released_at=done.released_at)


async def measured(rt: Runtime[CalibrationStore], run_id: UUID) -> Agreement:
    """Agreement over the run's calibration rows' reviews."""
    reviews = await rt.store.agreement_reviews(run_id=run_id, calibration_only=True)
    return agreement(review for review, _model in reviews)


async def release_when_met(rt: Runtime[CalibrationStore]) -> int:
    """Release every held run whose thresholds its calibration reviews now meet.

    Called after each review and on housekeeping's way, so a run is released
    within one chain step of the review that met its thresholds.
    """
    released = 0
    for run_id, thresholds in await rt.store.calibration_sweep():
        if not thresholds.unmet(await measured(rt, run_id)):
            released += (await release(rt, run_id, BY_THRESHOLDS)).released
    return released


def why_waiting(gate: Gate, figures: Agreement) -> str:
    """The page's sentence for held rows: what they wait for."""
    if gate.calibration_ended < gate.calibration:
        left = gate.calibration - gate.calibration_ended
        return f"waiting for {left} calibration row{'s' if left != 1 else ''} to be marked"
    unmet = gate.thresholds.unmet(figures) if gate.thresholds else []
    if unmet:
        return "waiting for the thresholds: " + "; ".join(unmet)
    if gate.thresholds is None:
        return "waiting for you to check the calibration rows and release the rest"
    return "the thresholds are met: releasing"
