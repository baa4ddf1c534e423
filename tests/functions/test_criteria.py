"""Per-criterion scores in the function's results (`criteria`: id, score, max_score)."""

from __future__ import annotations

import json

import pytest

from functions.ai_mark.core import mark
from functions.ai_mark.job import Job, criteria_shape, parse_dispatch
from functions.ai_mark.prompt import build_messages, parse_criteria
from functions.ai_mark.simulate import SimulatorBackend

from .conftest import ANSWER, make_dispatch

RUBRIC = [{"criterion": "Names chlorophyll", "points": 2, "keywords": ["chlorophyll"]},
          {"criterion": "Mentions oxygen", "points": 3, "keywords": ["oxygen"], "id": "oxy"},
          {"criterion": "Says sugar", "points": 5, "keywords": ["sugar"]}]


def job_with(rubric: object = RUBRIC, max_score: float = 10) -> Job:
    dispatch = make_dispatch()
    dispatch["payload"].update(rubric=rubric, max_score=max_score)
    return parse_dispatch(dispatch)


def test_each_criterion_has_an_id_and_its_share_of_max_score() -> None:
    assert criteria_shape(job_with()) == [("c1", 2), ("oxy", 3), ("c3", 5)]
    # Weights scale to max_score: 2:3:5 of 20.
    assert criteria_shape(job_with(max_score=20)) == [("c1", 4), ("oxy", 6), ("c3", 10)]
    assert criteria_shape(job_with("One\nTwo")) == [("c1", 5), ("c2", 5)]


async def test_the_simulator_scores_each_criterion() -> None:
    dispatch = make_dispatch()
    dispatch["payload"].update(rubric=RUBRIC, max_score=10)
    item = await mark(dispatch, SimulatorBackend(latency=0))
    result = item["result"]
    # The answer names chlorophyll and sugar, not oxygen.
    assert result["criteria"] == [{"id": "c1", "score": 2, "max_score": 2},
                                  {"id": "oxy", "score": 0, "max_score": 3},
                                  {"id": "c3", "score": 5, "max_score": 5}]
    assert result["score"] == sum(c["score"] for c in result["criteria"])


def test_the_prompt_lists_the_criteria_before_the_answer() -> None:
    _, user = build_messages(job_with())
    text = user["content"]
    assert "- oxy: Mentions oxygen (at most 3)" in text
    assert text.index("Criteria:") < text.index(ANSWER)


@pytest.mark.parametrize(("criteria", "expected"), [
    ([{"id": "c1", "score": 2}, {"id": "oxy", "score": 1.5}, {"id": "c3", "score": 4}],
     (("c1", 2, 2), ("oxy", 1.5, 3), ("c3", 4, 5))),
    ([{"id": "c1", "score": 2}, {"id": "oxy", "score": 1}], ()),  # one missing
    ([{"id": "c1", "score": 3}, {"id": "oxy", "score": 1}, {"id": "c3", "score": 4}], ()),
    ([{"id": "c1", "score": True}, {"id": "oxy", "score": 1}, {"id": "c3", "score": 4}], ()),
    ("not a list", ()),
])
def test_a_reply_s_criteria_are_kept_only_when_whole(criteria: object,
                                                      expected: tuple[object, ...]) -> None:
    reply = json.dumps({"score": 7, "feedback": "Fine", "criteria": criteria})
    assert parse_criteria(reply, job_with()) == expected
    assert parse_criteria("no json", job_with()) == ()
