"""The teacher page's words for a re-mark (docs/remark.md)."""

from __future__ import annotations

import pytest

from aiqueue.web.teacher_views import remark_button_text, remarked_view


@pytest.mark.parametrize(("enqueued", "cost", "text"), [
    (27, 0.1149, "Re-mark what changed (27 answers · about $0.11)"),
    (1, None, "Re-mark what changed (1 answer)"),
    (0, 0.0, ""),
])
def test_the_button_says_how_many_and_what_it_costs(enqueued: int, cost: float | None,
                                                    text: str) -> None:
    assert remark_button_text(enqueued, cost) == text


def test_a_re_marked_row_shows_both_marks_and_the_previous_feedback() -> None:
    words = remarked_view({"score": 7, "max_score": 10},
                          {"score": 6, "max_score": 10, "feedback": "Names light."}, False)
    assert words == {"remarked": "re-marked: 6 → 7", "previous": "Before: 6 / 10. Names light.",
                     "older_rubric": ""}


def test_an_unchanged_score_says_so_and_an_old_mark_says_its_rubric() -> None:
    assert remarked_view({"score": 4}, {"score": 4}, False)["remarked"] == \
        "re-marked: 4, unchanged"
    assert remarked_view({"score": 4}, None, True) == {
        "remarked": "", "previous": "", "older_rubric": "marked under an earlier rubric"}
