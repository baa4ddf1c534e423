"""Review holds' pure parts (docs/review-holds.md): the held result, the rubric's notes, the
list grouped by question, and the page's words."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from aiqueue import wire
from aiqueue.errors import Invalid
from aiqueue.models.holds import Hold
from aiqueue.queue.holds import held, is_held, rubric_sha256, with_notes
from aiqueue.reads.holds import review_needed
from aiqueue.web.holds_views import guess_text, needs_view
from aiqueue.wire.holds import ReviewRequest

NOW = datetime(2026, 11, 29, tzinfo=UTC)
Q1, Q2 = uuid.uuid4(), uuid.uuid4()


def review(**fields: object) -> ReviewRequest:
    return wire.parse(ReviewRequest, fields).check()


def test_a_held_result_keeps_the_functions_fields_and_scores_the_best_guess():
    result = held({"score": 10, "max_score": 10, "feedback": "f"},
                  review(reason="clarification", question="Does it count?", best_guess=6))
    assert result == {"score": 6, "max_score": 10, "feedback": "f", "review_required": True,
                      "review_reason": "clarification",
                      "review": {"reason": "clarification", "question": "Does it count?",
                                 "best_guess": 6}}
    assert is_held(result) and not is_held({"score": 1})
    bare = held(None, review(reason="low_confidence"))
    assert bare["score"] is None and bare["review"] == {"reason": "low_confidence",
                                                        "best_guess": None}


@pytest.mark.parametrize(("fields", "detail"), [
    ({"reason": "clarification"}, "review.question is required with a clarification"),
    ({"reason": "low_confidence", "question": "q"}, "review.question is only for a "
                                                    "clarification"),
    ({"reason": "maybe"}, "review.reason must be"),
    ({"reason": "low_confidence", "best_guess": float("inf")}, "review.best_guess must be"),
    ({"reason": "clarification", "question": "a\x00b"}, "review.question must be text"),
])
def test_a_malformed_review_names_its_field_never_the_words(fields: dict[str, object],
                                                             detail: str):
    with pytest.raises(Invalid) as refused:
        review(**fields)
    assert str(refused.value).startswith(detail)


def test_notes_belong_to_the_rubric_without_them_and_are_added_once_in_order():
    rubric = {"rubric": "r", "max_score": 10}
    n1 = {"question_id": "1", "question": "a?", "answer": "yes"}
    n2 = {"question_id": "2", "question": "b?", "answer": "no"}
    noted = with_notes(rubric, [n1])
    assert noted == {**rubric, "marking_notes": [n1]}
    assert rubric_sha256(noted) == rubric_sha256(rubric)
    assert rubric_sha256({"max_score": 10, "rubric": "r"}) == rubric_sha256(rubric)
    assert rubric_sha256({**rubric, "rubric": "other"}) != rubric_sha256(rubric)
    assert with_notes(noted, [n1, n2])["marking_notes"] == [n1, n2]
    assert with_notes(noted, [n1]) is noted  # nothing new: the same payload


def hold(question_id: uuid.UUID | None, reason: str = "clarification",
         guess: float | None = 4, text: str | None = "Does it count?") -> Hold:
    return Hold(uuid.uuid4(), uuid.uuid4(), reason, question_id,  # type: ignore[arg-type]
                text if question_id else None, guess, 10, NOW, "ab12")


def test_the_list_shows_each_question_once_with_its_rows():
    holds = [hold(Q1), hold(Q2, text="Another?"), hold(Q1), hold(None, "suspected_injection")]
    answer = review_needed("hw", holds)
    assert answer.count == 4 and [i.queue_id for i in answer.items] == [h.queue_id
                                                                        for h in holds]
    assert [(q.question_id, q.rows) for q in answer.questions] == [
        (Q1, [holds[0].queue_id, holds[2].queue_id]), (Q2, [holds[1].queue_id])]


def test_the_pages_words():
    assert guess_text(hold(Q1, guess=6.5)) == "best guess 6.5 / 10"
    assert guess_text(hold(Q1, guess=None)) == "no guess"
    holds = [hold(Q1), hold(Q1), hold(None, "low_confidence")]
    view = needs_view(holds, {str(holds[0].submission_id): "Ada"})
    assert view["title"] == "Needs you: 3"
    [q] = view["questions"]
    assert q["asked_by"] == "asked by 2 answers" and q["rows"][0]["name"] == "Ada"
    assert q["rows"][1]["name"].startswith("Submission ")
    assert view["others"][0]["reason"] == "the marker's own check of its mark failed"
