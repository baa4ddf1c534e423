"""When the marker should ask a teacher instead of guessing (docs/review-holds.md).

After a backend marked a job, one of three reasons may hold its result for a
teacher, most serious first:
- `suspected_injection`: the answer speaks to the marker (screen.py).  The
  best guess is then never a full mark: at most max_score less the smallest
  criterion's share.
- `clarification`: the rubric doesn't decide the answer; the backend asked
  (the simulator: a criterion the answer half meets).
- `low_confidence`: the marking fails its own check: the per-criterion scores
  don't add up to the total (more than max(1, 10 %) apart).
"""

from __future__ import annotations

from dataclasses import replace

from .items import Marking
from .job import Job, Score, criteria_shape
from .screen import Kind


def ceiling(job: Job) -> Score:
    """The most a suspected answer's best guess may be: one criterion short of full."""
    top = job.max_score - min(most for _cid, most in criteria_shape(job))
    rounded = round(max(top, 0), 2)
    return int(rounded) if float(rounded).is_integer() else rounded


def consistent(job: Job, marking: Marking) -> bool:
    """Whether the per-criterion scores (when given) add up to the total."""
    if not marking.criteria:
        return True
    total = sum(score for _cid, score, _most in marking.criteria)
    return abs(total - marking.score) <= max(1.0, 0.1 * job.max_score)


def reviewed(job: Job, marking: Marking, suspected: Kind | None) -> Marking:
    """The marking, held for a teacher when one of the reasons above holds."""
    if suspected is not None:
        guess = min(marking.score, ceiling(job))
        return replace(marking, score=guess, extra={**marking.extra, "screen": suspected},
                       review={"reason": "suspected_injection", "best_guess": guess})
    if marking.review is not None:
        return marking
    if not consistent(job, marking):
        return replace(marking, review={"reason": "low_confidence",
                                        "best_guess": marking.score})
    return marking
