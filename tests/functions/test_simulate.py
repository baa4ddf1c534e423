"""The simulator: deterministic rubric coverage, labelled, with reproducible failures."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from functions.ai_mark.core import mark
from functions.ai_mark.job import Criterion, parse_dispatch
from functions.ai_mark.simulate import SimulatorBackend, covered, fails, keywords, score_answer

from .conftest import make_dispatch


def with_answer(content: str, **payload: Any) -> dict[str, Any]:
    dispatch = make_dispatch()
    dispatch["submission"]["content"] = content
    dispatch["payload"].update(payload)
    return dispatch


async def test_result_is_labelled_as_simulated() -> None:
    item = await mark(make_dispatch(), SimulatorBackend(latency=0))
    assert item["status"] == "completed"
    assert item["usage"]["model"] == "simulator"
    assert item["result"]["simulated"] is True and item["usage"]["simulated"] is True
    assert item["usage"]["prompt_tokens"] > 0 and item["usage"]["completion_tokens"] > 0


async def test_simulated_token_counts_are_plausible() -> None:
    """About four characters per token of the prompt a model would be sent."""
    short = await mark(with_answer("Light."), SimulatorBackend(latency=0))
    long = await mark(with_answer("Light and water and carbon dioxide. " * 40),
                      SimulatorBackend(latency=0))
    grown = long["usage"]["prompt_tokens"] - short["usage"]["prompt_tokens"]
    added = len("Light and water and carbon dioxide. " * 40) - len("Light.")
    assert added / 5 < grown < added / 3
    assert 5 < long["usage"]["completion_tokens"] < 500


async def test_scores_by_weighted_criteria_covered() -> None:
    # Criterion 1 (2 points) and 2 (1 point) are covered, 3 (1 point) is not: 3/4 of 10.
    item = await mark(make_dispatch(), SimulatorBackend(latency=0))
    result = item["result"]
    assert result["score"] == 7.5
    assert result["criteria_met"] == 2 and result["criteria_total"] == 3
    assert "2 of 3" in result["feedback"]
    assert "Criteria missed: 3 (Mentions carbon dioxide and water as inputs)." in result["feedback"]


async def test_full_and_empty_coverage() -> None:
    full = "Plants use sunlight; chlorophyll is the pigment; carbon dioxide and water go in."
    none = "I do not know."
    backend = SimulatorBackend(latency=0)
    assert (await mark(with_answer(full), backend))["result"]["score"] == 10
    assert (await mark(with_answer(none), backend))["result"]["score"] == 0


async def test_feedback_never_quotes_the_answer() -> None:
    item = await mark(make_dispatch(), SimulatorBackend(latency=0))
    assert "SECRET-ANSWER-42" not in item["result"]["feedback"]
    assert "turn it into sugar" not in item["result"]["feedback"]


async def test_same_input_same_result() -> None:
    backend = SimulatorBackend(latency=0)
    first, second = await mark(make_dispatch(), backend), await mark(make_dispatch(), backend)
    assert first == second


async def test_structured_rubric_with_keywords_and_points() -> None:
    rubric = [
        {"criterion": "Uses the right term", "points": 3, "keywords": ["photosynthesis"]},
        {"criterion": "Gives an example", "points": 1, "keywords": ["oak", "fern"]},
    ]
    dispatch = with_answer("Photosynthetic cells in an oak tree.", rubric=rubric, max_score=4)
    item = await mark(dispatch, SimulatorBackend(latency=0))
    assert item["result"]["score"] == 4


async def test_latency_is_awaited_through_the_injected_sleep() -> None:
    waited: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waited.append(seconds)

    await mark(make_dispatch(), SimulatorBackend(latency=1.5, sleep=fake_sleep))
    assert waited == [1.5]


async def test_failure_rate_is_deterministic_per_attempt() -> None:
    backend = SimulatorBackend(latency=0, failure_rate=0.5)
    outcomes = {}
    for attempt in range(1, 21):
        dispatch = make_dispatch(attempt=attempt)
        first, again = await mark(dispatch, backend), await mark(dispatch, backend)
        assert first == again  # the same attempt always ends the same way
        outcomes[attempt] = first["status"]
    # Some attempts fail and some succeed, so a retry (the next attempt) can succeed.
    assert set(outcomes.values()) == {"completed", "failed"}
    failed = next(a for a, status in outcomes.items() if status == "failed")
    item = await mark(make_dispatch(attempt=failed), backend)
    assert item["error"] == "simulated_failure" and item["retryable"] is True


def test_failure_rate_bounds() -> None:
    ids = [f"q-{n}" for n in range(200)]
    assert not any(fails(q, 1, 0.0) for q in ids)
    assert all(fails(q, 1, 1.0) for q in ids)
    share = sum(fails(q, 1, 0.3) for q in ids) / len(ids)
    assert 0.15 < share < 0.45


def test_keywords_skip_rubric_verbs() -> None:
    assert keywords(Criterion("Explains that plants use sunlight")) == ("plants", "sunlight")
    assert keywords(Criterion("Anything", keywords=("Light Energy",))) == ("light energy",)


def test_coverage_needs_half_the_keywords_and_tolerates_word_forms() -> None:
    criterion = Criterion("Mentions carbon dioxide and water")
    assert covered(criterion, {"carbon", "dioxide"})
    assert not covered(criterion, {"water"})
    assert covered(Criterion("Describes photosynthesis"), {"photosynthetic"})


@given(
    content=st.text(min_size=1).filter(lambda s: s.strip()),
    max_score=st.integers(min_value=1, max_value=100),
)
def test_score_is_always_within_range(content: str, max_score: int) -> None:
    job = parse_dispatch(with_answer(content, max_score=max_score))
    marking = score_answer(job)
    assert 0 <= marking.score <= max_score
    assert marking.feedback.strip()
