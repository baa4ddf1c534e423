"""The agreement card's and the calibration gate's words on the teacher page."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from aiqueue.models.agreement import Review, agreement
from aiqueue.models.calibration import Gate, Thresholds
from aiqueue.queue.calibration import why_waiting
from aiqueue.reads.agreement import Card
from aiqueue.web.agreement_views import agreement_text, card_view, release_text, with_held


def reviews(pairs: Sequence[tuple[float, float]], reverted: int = 0) -> list[Review]:
    done = [Review(uuid.uuid4(), "accepted", {"score": a, "max_score": 10},
                   None if a == b else {"score": b}, uuid.uuid4()) for a, b in pairs]
    return done + [Review(uuid.uuid4(), "reverted", {"score": 1}) for _ in range(reverted)]


def gate(**changes: object) -> Gate:
    base = dict(run_id=uuid.uuid4(), assignment_id="hw", calibration_rows=5, thresholds=None,
                released_at=None, released_by=None, ready_at=None, calibration=5,
                calibration_ended=5, held=25, row_cost_usd=0.0048)
    return Gate(**{**base, **changes})  # type: ignore[arg-type]


def test_the_card_sentence() -> None:
    twelve = [(5, 5)] * 4 + [(6, 6), (7, 7), (3, 3), (8, 8), (2, 2), (9, 9), (4, 5), (6, 5)]
    text = agreement_text(agreement(reviews(twelve)), 10)
    assert text.startswith("12 checked: 10 exact, all within 1 point, κ ")
    assert agreement_text(agreement(reviews([(5, 8), (5, 5)], reverted=1)), 20) == \
        "3 checked: 1 exact, 1 within 2 points, 1 reverted"
    assert agreement_text(agreement([]), 10).startswith("No marks checked yet")


def test_the_release_button_and_the_progress_words() -> None:
    assert release_text(25, 0.0048) == "Release the other 25 (about $0.12)"
    assert release_text(25, None) == "Release the other 25"
    card = Card(gate(), agreement(reviews([(5, 5)])))
    view = with_held({"total": 30, "text": "5 of 30 marked — about 1 min left"}, card)
    assert view["text"] == "5 of 30 marked — the other 25 wait for your check"
    shown = card_view(card, 10)
    assert shown["held"] == 25 and shown["why"] is None  # the plain case: gate_text says it
    assert shown["release_text"] == "Release the other 25 (about $0.12)"


def test_why_the_rest_wait() -> None:
    figures = agreement(reviews([(5, 5), (5, 3), (5, 2)]))
    marking = gate(calibration_ended=3)
    assert why_waiting(marking, figures) == "waiting for 2 calibration rows to be marked"
    strict = gate(thresholds=Thresholds(reviewed=5, exact=0.6))
    assert why_waiting(strict, figures) == ("waiting for the thresholds: 3 of 5 calibration "
                                            "rows reviewed; exact: 33%, needs 60%")
    assert Thresholds(reviewed=3, adjacent=0.3).unmet(figures) == []
