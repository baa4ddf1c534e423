"""Drift canaries' shapes (docs/canaries.md): a run as the API lists it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from aiqueue.models.canary import CanaryRun
from aiqueue.wire.base import Wire
from aiqueue.wire.fields import Count, Time, Uuid


class CanaryYardstick(Wire):
    """The figures the run was held to: the last passing (or accepted) canary's."""

    exact: float | None = None
    qwk: float | None = None


class CanaryRunAnswer(Wire):
    """One canary run."""

    run_id: Uuid
    kind: str
    time: Time = Field(description="when it started")
    trigger: Literal["schedule", "model_change", "manual"]
    state: Literal["running", "finished", "skipped"]
    lane: Literal["live", "batch"]
    model: str | None = Field(description="the model its results reported (a model_change "
                                          "run: the one seen, until its results come)")
    function_version: str | None = None
    rows: Count = Field(description="teacher-reviewed results it re-marks")
    answered: Count
    exact: float | None = Field(description="share of its marks equal to the teachers'")
    qwk: float | None = Field(description="quadratic weighted kappa against the teachers'")
    cost: float | None = Field(description="USD its rows cost (lane \"canary\" in the usage "
                                           "report)")
    passed: bool | None = Field(description="null while it runs, when skipped, or with no "
                                            "answered row")
    skipped: str | None = Field(description="why it did not run (max_share, nothing to "
                                            "re-mark)")
    yardstick: CanaryYardstick | None = None
    finished_at: Time | None = None
    accepted_at: Time | None = Field(default=None, description=(
        "an operator accepted its drift: it is the yardstick"))

    @classmethod
    def of(cls, run: CanaryRun) -> CanaryRunAnswer:
        yard = None if run.yardstick_exact is None and run.yardstick_qwk is None else \
            CanaryYardstick(exact=run.yardstick_exact, qwk=run.yardstick_qwk)
        return cls(run_id=run.run_id, kind=run.kind, time=run.started_at,
                   trigger=run.trigger, state=run.state,
                   lane="batch" if run.lane == "batch" else "live",
                   model=run.model or run.trigger_model,
                   function_version=run.function_version or run.trigger_version,
                   rows=run.rows, answered=run.answered, exact=run.exact, qwk=run.qwk,
                   cost=run.cost_usd, passed=run.passed, skipped=run.skipped,
                   yardstick=yard, finished_at=run.finished_at, accepted_at=run.accepted_at)


class CanaryRuns(Wire):
    """GET /api/marking/canary: canary runs, newest first."""

    items: list[CanaryRunAnswer]

