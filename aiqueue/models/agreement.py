"""Agreement between the AI's marks and a teacher's reviews (docs/agreement.md).

The one place its figures are computed: the API, the teacher page, /ai-queue
and the calibration gate's thresholds all read them from `agreement()`.
Each reviewed row gives a pair (AI score, teacher's score): an accept gives
equal scores, an accept with an adjusted score gives that score, a revert
gives no pair and counts as reverted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

# Two scores closer than this are equal (scores travel as JSON numbers).
EPSILON = 1e-9
# The fewest pairs kappa is reported for.
MIN_KAPPA_PAIRS = 5
MAX_DISAGREEMENTS = 20


@dataclass(frozen=True)
class Review:
    """A reviewed result as stored: the AI's result and the teacher's adjusted one, if any."""

    queue_id: UUID
    review: str  # 'accepted' or 'reverted'
    result: Mapping[str, Any] | None
    adjusted: Mapping[str, Any] | None = None
    # Where the page links a disagreement to (not part of any figure).
    submission_id: UUID | None = None


@dataclass(frozen=True)
class Pair:
    """One reviewed row's two scores, its max_score and its criteria pairs."""

    queue_id: UUID
    ai: float
    teacher: float
    max_score: float | None
    criteria: tuple[tuple[str, float, float], ...] = ()
    submission_id: UUID | None = None

    @property
    def difference(self) -> float:
        return abs(self.ai - self.teacher)

    @property
    def exact(self) -> bool:
        return self.difference <= EPSILON

    @property
    def adjacent(self) -> bool:
        """Within max(1, 10 % of max_score) points."""
        return self.difference <= max(1.0, 0.1 * (self.max_score or 0)) + EPSILON


@dataclass(frozen=True)
class CriterionAgreement:
    id: str
    reviewed: int
    exact: float


@dataclass(frozen=True)
class Agreement:
    """The contract's figures; shares and errors are None when there is no pair."""

    reviewed: int = 0
    reverted: int = 0
    exact: float | None = None
    adjacent: float | None = None
    mean_abs_error: float | None = None
    qwk: float | None = None
    criteria: list[CriterionAgreement] = field(default_factory=list)
    disagreements: list[UUID] = field(default_factory=list)
    # The same rows' submissions (where known), for the page's links.
    disagreement_submissions: list[UUID] = field(default_factory=list)
    # Counts behind the shares, for the pages' sentences.
    pairs: int = 0
    exact_count: int = 0
    adjacent_count: int = 0
    max_difference: float = 0.0


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _criteria(result: Mapping[str, Any] | None) -> dict[str, float] | None:
    """A result's criteria as {id: score}; None when it carries none."""
    items = result.get("criteria") if result else None
    if not isinstance(items, list):
        return None
    found: dict[str, float] = {}
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("id"), str | int):
            score = _number(item.get("score"))
            if score is not None:
                found.setdefault(str(item["id"]), score)
    return found


def pair_of(review: Review) -> Pair | None:
    """The row's pair, or None (reverted, or the AI's result has no numeric score)."""
    if review.review != "accepted" or review.result is None:
        return None
    ai = _number(review.result.get("score"))
    if ai is None:
        return None
    adjusted = review.adjusted
    teacher = _number(adjusted.get("score")) if adjusted else None
    max_score = _number(review.result.get("max_score"))
    if max_score is None and adjusted:
        max_score = _number(adjusted.get("max_score"))
    ai_criteria = _criteria(review.result) or {}
    # A plain accept agrees with every criterion; an adjusted result only where it says.
    theirs = ai_criteria if adjusted is None else _criteria(adjusted) or {}
    criteria = tuple((cid, score, theirs[cid]) for cid, score in ai_criteria.items()
                     if cid in theirs)
    return Pair(review.queue_id, ai, ai if teacher is None else teacher, max_score, criteria,
                review.submission_id)


def _integer(score: float, max_score: float | None) -> int:
    """A score on kappa's integer scale 0..max_score (half up, clamped)."""
    n = max(0, math.floor(score + 0.5))
    return min(n, math.floor(max_score)) if max_score is not None and max_score >= 0 else n


def quadratic_weighted_kappa(pairs: Sequence[tuple[int, int]]) -> float | None:
    """Cohen's kappa with weights (a - b)^2: 1 - observed / expected disagreement.

    None under 5 pairs or when a single score is seen (no expected disagreement).
    """
    n = len(pairs)
    if n < MIN_KAPPA_PAIRS:
        return None
    observed = sum((a - b) ** 2 for a, b in pairs) / n
    first: dict[int, int] = {}
    second: dict[int, int] = {}
    for a, b in pairs:
        first[a] = first.get(a, 0) + 1
        second[b] = second.get(b, 0) + 1
    expected = sum(ca * cb * (a - b) ** 2 for a, ca in first.items()
                   for b, cb in second.items()) / (n * n)
    if expected == 0:
        return None
    return 1.0 - observed / expected


def _criteria_agreement(pairs: Sequence[Pair]) -> list[CriterionAgreement]:
    seen: dict[str, list[int]] = {}
    for p in pairs:
        for cid, ai, teacher in p.criteria:
            tally = seen.setdefault(cid, [0, 0])
            tally[0] += 1
            tally[1] += abs(ai - teacher) <= EPSILON
    return [CriterionAgreement(cid, n, same / n) for cid, (n, same) in seen.items()]


def agreement(reviews: Iterable[Review]) -> Agreement:
    """The figures over reviewed rows (in the order given: ties keep it)."""
    reviewed = reverted = 0
    pairs: list[Pair] = []
    for review in reviews:
        if review.review == "reverted":
            reviewed += 1
            reverted += 1
            continue
        pair = pair_of(review)
        if pair is not None:
            reviewed += 1
            pairs.append(pair)
    if not pairs:
        return Agreement(reviewed=reviewed, reverted=reverted)
    n = len(pairs)
    exact = sum(p.exact for p in pairs)
    adjacent = sum(p.adjacent for p in pairs)
    apart = sorted((p for p in pairs if not p.exact), key=lambda p: -p.difference)
    return Agreement(
        reviewed=reviewed, reverted=reverted, exact=exact / n, adjacent=adjacent / n,
        mean_abs_error=sum(p.difference for p in pairs) / n,
        qwk=quadratic_weighted_kappa([(_integer(p.ai, p.max_score),
                                       _integer(p.teacher, p.max_score)) for p in pairs]),
        criteria=_criteria_agreement(pairs),
        disagreements=[p.queue_id for p in apart[:MAX_DISAGREEMENTS]],
        disagreement_submissions=[p.submission_id for p in apart[:MAX_DISAGREEMENTS]
                                  if p.submission_id is not None],
        pairs=n, exact_count=exact, adjacent_count=adjacent,
        max_difference=max(p.difference for p in pairs))
