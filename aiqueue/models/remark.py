"""What a re-mark did or would do (docs/remark.md): its plan and its outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal
from uuid import UUID

from aiqueue.models.queue import QueueId, SubmissionId

# What a re-mark does to one submission (sql/remark.sql: remark_plan says when).
Plan = Literal["unchanged", "unmarked", "reviewed_kept", "remark"]


@dataclass(frozen=True)
class RemarkPlan:
    """The assignment's submissions by what a re-mark does to them."""

    remark: list[SubmissionId] = field(default_factory=list)
    unchanged: int = 0
    reviewed_kept: int = 0
    unmarked: int = 0

    @classmethod
    def of(cls, rows: list[tuple[UUID, str]]) -> RemarkPlan:
        """From remark_plan's (id, plan) rows."""
        plans = [p for _, p in rows]
        return cls(remark=[SubmissionId(i) for i, p in rows if p == "remark"],
                   unchanged=plans.count("unchanged"), reviewed_kept=plans.count("reviewed_kept"),
                   unmarked=plans.count("unmarked"))


@dataclass(frozen=True)
class RemarkDefaults:
    """What a re-mark's rows take from the assignment's newest row (None: the defaults)."""

    kind: str | None = None
    group: str | None = None
    priority: int = 0


@dataclass(frozen=True)
class Remarked:
    """A re-mark that went in: its plan, the rows it added and the rows it superseded."""

    plan: RemarkPlan
    queue_ids: list[QueueId]
    same_answers: int
    superseded: int
    run_id: UUID | None
