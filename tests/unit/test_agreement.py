"""The agreement figures (docs/agreement.md) against examples worked by hand."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from aiqueue.models.agreement import Review, agreement, pair_of, quadratic_weighted_kappa

TOL = 1e-9


def accepted(score: float, adjusted: float | None = None, max_score: float = 10,
             **extra: Any) -> Review:
    result = {"score": score, "max_score": max_score, "feedback": "never read"}
    result.update(extra.get("result", {}))
    adj = None if adjusted is None else {"score": adjusted, "max_score": max_score,
                                         **extra.get("adjusted_extra", {})}
    return Review(uuid.uuid4(), "accepted", result, adj)


def test_kappa_by_hand_contiguous_scores() -> None:
    # observed (a-b)^2: 0+0+1+0+1 = 2, /5 = 0.4; expected 44/25 = 1.76; 1 - 5/22.
    pairs = [(0, 0), (1, 1), (2, 1), (2, 2), (3, 2)]
    assert quadratic_weighted_kappa(pairs) == pytest.approx(17 / 22, abs=TOL)


def test_kappa_weights_are_the_scores_themselves() -> None:
    # Scores 0, 1 and 3: a weight of (3-1)^2 = 4, not (2-1)^2 = 1 as label indices
    # would give.  observed (0+0+4+1+0)/5 = 1; first {0:2, 3:2, 1:1},
    # second {0:1, 1:3, 3:1}: expected (2*(0+3+9) + 2*(9+12+0) + (1+0+4))/25 = 71/25.
    pairs = [(0, 0), (3, 3), (3, 1), (0, 1), (1, 1)]
    assert quadratic_weighted_kappa(pairs) == pytest.approx(46 / 71, abs=TOL)


def test_kappa_edges() -> None:
    # Under 5 pairs: null, however well they agree.
    assert quadratic_weighted_kappa([(1, 1), (2, 2), (3, 3), (4, 4)]) is None
    # A single score seen by both: no expected disagreement, null.
    assert quadratic_weighted_kappa([(5, 5)] * 6) is None
    # Perfect agreement over varied scores: 1.
    assert quadratic_weighted_kappa([(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)]) == 1.0
    # The AI always says 5, the teacher varies: no better than chance, 0.
    assert quadratic_weighted_kappa([(5, 5), (5, 4), (5, 6), (5, 5), (5, 5)]) == \
        pytest.approx(0.0, abs=TOL)
    # Systematic disagreement: below zero.  observed 36/5; expected 92/25.
    pairs = [(0, 3), (3, 0), (0, 3), (3, 0), (1, 1)]
    assert quadratic_weighted_kappa(pairs) == pytest.approx(-22 / 23, abs=TOL)


def test_figures_by_hand() -> None:
    # Scores out of 10 (adjacent: within 1 point); two accepted as they are, three
    # adjusted, one reverted.
    rows = [accepted(7), accepted(4), accepted(6, 7), accepted(9, 5), accepted(3, 1),
            Review(uuid.uuid4(), "reverted", {"score": 2, "max_score": 10})]
    got = agreement(rows)
    assert (got.reviewed, got.reverted, got.pairs) == (6, 1, 5)
    assert got.exact == pytest.approx(2 / 5, abs=TOL)
    assert got.adjacent == pytest.approx(3 / 5, abs=TOL)  # 0, 0, 1 apart; 4 and 2 are not
    assert got.mean_abs_error == pytest.approx((0 + 0 + 1 + 4 + 2) / 5, abs=TOL)
    # (7,7) (4,4) (6,7) (9,5) (3,1): observed (0+0+1+16+4)/5 = 21/5;
    # first {7,4,6,9,3}, second {7:2,4,5,1}: expected = sum over a, b of (a-b)^2 / 25.
    first, second = [7, 4, 6, 9, 3], [7, 4, 7, 5, 1]
    expected = sum((a - b) ** 2 for a in first for b in second) / 25
    assert got.qwk == pytest.approx(1 - (21 / 5) / expected, abs=TOL)
    # Largest difference first; the exact pairs are no disagreement.
    assert got.disagreements == [rows[3].queue_id, rows[4].queue_id, rows[2].queue_id]


def test_adjacent_scales_with_max_score() -> None:
    # Out of 40, 10 % is 4 points; out of 5, one point still counts.
    got = agreement([accepted(30, 26, max_score=40), accepted(30, 25, max_score=40),
                     accepted(4, 3, max_score=5)])
    assert got.adjacent == pytest.approx(2 / 3, abs=TOL)
    assert got.qwk is None  # three pairs


def test_no_pairs_and_unscored_results() -> None:
    assert agreement([]).exact is None
    only_reverted = agreement([Review(uuid.uuid4(), "reverted", None)])
    assert (only_reverted.reviewed, only_reverted.reverted, only_reverted.exact) == (1, 1, None)
    # A result without a numeric score gives no pair and is not counted.
    assert pair_of(Review(uuid.uuid4(), "accepted", {"score": "B+"})) is None
    assert pair_of(Review(uuid.uuid4(), "accepted", {"score": True})) is None
    # An adjusted result without a score keeps the AI's score.
    p = pair_of(Review(uuid.uuid4(), "accepted", {"score": 6}, {"feedback": "x"}))
    assert p is not None and p.teacher == 6.0 and p.adjacent


def test_criteria_agreement() -> None:
    crit = {"criteria": [{"id": "c1", "score": 2, "max_score": 4},
                         {"id": "c2", "score": 3, "max_score": 6}]}
    plain = accepted(5, result=crit)  # a plain accept agrees with every criterion
    adjusted = accepted(5, 4, result=crit, adjusted_extra={
        "criteria": [{"id": "c1", "score": 2, "max_score": 4},
                     {"id": "c2", "score": 2, "max_score": 6}]})
    no_criteria = accepted(5, 4, result=crit)  # the adjustment names none: left out
    got = agreement([plain, adjusted, no_criteria])
    assert [(c.id, c.reviewed) for c in got.criteria] == [("c1", 2), ("c2", 2)]
    assert got.criteria[0].exact == 1.0 and got.criteria[1].exact == pytest.approx(0.5)


def test_disagreements_are_capped_at_twenty() -> None:
    rows = [accepted(10, 10 - (i % 10) - 1) for i in range(30)]
    got = agreement(rows)
    assert len(got.disagreements) == 20
    # The ten rows 10 points apart come first.
    assert set(got.disagreements[:3]) <= {r.queue_id for r in rows[9::10]}


def test_kappa_on_integer_scale() -> None:
    # Half-points round half up onto 0..max_score, and scores above max are clamped.
    rows = [accepted(2.5, 3), accepted(1, 1), accepted(0, 0), accepted(4, 4), accepted(12, 10)]
    got = agreement(rows)
    assert got.qwk == 1.0 and got.exact == pytest.approx(3 / 5)
