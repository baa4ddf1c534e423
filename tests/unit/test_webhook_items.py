"""Webhook items: verify_results checks a callback token first and once (what each kind of
item becomes), and an item's error text becomes a content-free code."""

from __future__ import annotations

from uuid import uuid4

import pytest

from aiqueue.errors import Invalid, Unauthorized
from aiqueue.queue.probes import ProbeAnswer
from aiqueue.queue.results import ResultItem, error_code
from aiqueue.queue.webhook import verify_results
from aiqueue.tokens import Tokens

TOKENS = Tokens("unit-secret-0123456789abcdef")


def test_a_callback_item_is_verified_to_its_dispatch() -> None:
    queue_id = uuid4()
    item = {"queue_id": str(queue_id), "token": TOKENS.callback(queue_id, 4, 2),
            "status": "completed", "result": {"score": 3}}
    [parsed] = verify_results(TOKENS, [item])
    assert isinstance(parsed, ResultItem)
    assert (parsed.claim.queue_id, parsed.claim.dispatch_seq, parsed.claim.attempt) == \
        (queue_id, 4, 2)
    assert parsed.result == {"score": 3}


def test_a_probe_token_still_makes_a_probe_answer() -> None:
    probe_id = uuid4()
    item = {"queue_id": str(probe_id), "token": TOKENS.probe(probe_id), "status": "probe",
            "probe": {"function": "ai_mark"}}
    [parsed] = verify_results(TOKENS, [item])
    assert parsed == ProbeAnswer(probe_id, "probe", {"function": "ai_mark"})


def test_a_probe_item_with_a_callback_token_is_rejected() -> None:
    queue_id = uuid4()
    item = {"queue_id": str(queue_id), "token": TOKENS.callback(queue_id, 1, 1),
            "status": "probe"}
    with pytest.raises(Unauthorized):
        verify_results(TOKENS, [item])


def test_a_callback_token_for_another_row_is_rejected() -> None:
    item = {"queue_id": str(uuid4()), "token": TOKENS.callback(uuid4(), 1, 1),
            "status": "completed", "result": {}}
    with pytest.raises(Unauthorized):
        verify_results(TOKENS, [item])


def test_a_malformed_item_with_a_good_token_is_still_422() -> None:
    queue_id = uuid4()
    item = {"queue_id": str(queue_id), "token": TOKENS.callback(queue_id, 1, 1),
            "status": "completed"}  # no result
    with pytest.raises(Invalid):
        verify_results(TOKENS, [item])


def test_error_texts_become_content_free_codes():
    assert error_code("model_timeout") == "function:model_timeout"
    assert error_code("The student wrote about photosynthesis") == "function_failed"
    assert error_code(None) == "function_failed"
    assert error_code("x" * 100) == "function_failed"


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": -5, "completion_tokens": 10},
    {"prompt_tokens": 5, "cost_usd": -0.01},
    {"prompt_tokens": float("inf"), "completion_tokens": 10},  # `1e400` reads as inf
    {"total_tokens": float("nan")},
    {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": -1}},
])
def test_an_unsound_usage_is_refused_and_the_result_still_applies(usage: dict[str, float]) -> None:
    queue_id = uuid4()
    item = {"queue_id": str(queue_id), "token": TOKENS.callback(queue_id, 1, 1),
            "status": "completed", "result": {"score": 3}, "usage": usage}
    [parsed] = verify_results(TOKENS, [item])
    assert isinstance(parsed, ResultItem)
    assert parsed.result == {"score": 3} and parsed.usage is None


def test_a_huge_whole_number_is_no_500() -> None:
    queue_id = uuid4()
    item = {"queue_id": str(queue_id), "token": TOKENS.callback(queue_id, 1, 1),
            "status": "completed", "result": {"score": 3},
            "usage": {"prompt_tokens": 10**400, "completion_tokens": 1}}
    [parsed] = verify_results(TOKENS, [item])
    assert isinstance(parsed, ResultItem) and parsed.result == {"score": 3}


def test_a_sound_usage_is_kept() -> None:
    queue_id = uuid4()
    usage = {"model": "m", "prompt_tokens": 0, "completion_tokens": 10, "cost_usd": 0.5}
    item = {"queue_id": str(queue_id), "token": TOKENS.callback(queue_id, 1, 1),
            "status": "completed", "result": {"score": 3}, "usage": usage}
    [parsed] = verify_results(TOKENS, [item])
    assert isinstance(parsed, ResultItem) and parsed.usage == usage


@pytest.mark.parametrize("cost", [1000.01, 1e308, float("inf"), float("nan")])
def test_a_cost_above_1000_or_not_finite_is_refused_for_cost(cost: float) -> None:
    queue_id = uuid4()
    item = {"queue_id": str(queue_id), "token": TOKENS.callback(queue_id, 1, 1),
            "status": "completed", "result": {"score": 3},
            "usage": {"model": "m", "prompt_tokens": 5, "completion_tokens": 1,
                      "cost_usd": cost}}
    [parsed] = verify_results(TOKENS, [item])
    assert isinstance(parsed, ResultItem) and parsed.result == {"score": 3}
    # The tokens stay (priced, if the model has a price); the cost sent is refused.
    assert parsed.usage == {"model": "m", "prompt_tokens": 5, "completion_tokens": 1}
    at_bound = {**item, "usage": {"cost_usd": 1000}}
    [kept] = verify_results(TOKENS, [at_bound])
    assert isinstance(kept, ResultItem) and kept.usage == {"cost_usd": 1000}
