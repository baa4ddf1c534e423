"""Pricing, usage ranges, counters and QUEUE_MODEL_PRICES: pure functions, no I/O."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

import pytest

from aiqueue.errors import Invalid, SettingsError
from aiqueue.models import EventCursor, MarkingEvent, QueueId, SubmissionId
from aiqueue.queue.actions import adjusted_result
from aiqueue.queue.review import parse_actor, parse_adjusted
from aiqueue.queue.spend import cost_usd
from aiqueue.reads.usage import usage_range
from aiqueue.settings import ModelPrice, load_settings
from tests.conftest import METRICS

PRICES = {"gpt-x": ModelPrice(input=2.0, output=8.0)}


def test_cost_is_the_functions_own_else_priced_else_unknown():
    assert cost_usd({"model": "gpt-x", "prompt_tokens": 1000, "completion_tokens": 250,
                     "cost_usd": 0.5}, PRICES) == 0.5
    assert cost_usd({"model": "gpt-x", "prompt_tokens": 1000, "completion_tokens": 250},
                    PRICES) == pytest.approx(0.004)
    assert cost_usd({"model": "other", "prompt_tokens": 10}, PRICES) is None
    assert cost_usd(None, PRICES) is None


def test_model_prices_setting_is_validated_with_one_line_naming_it():
    env = {"QUEUE_MODEL_PRICES": '{"gpt-x": {"input": 2, "output": 8}}'}
    assert load_settings(env).model_prices == PRICES
    assert load_settings({}).model_prices == {}
    for bad in ("{", "[]", '{"m": {"input": 1}}', '{"m": {"input": -1, "output": 1}}',
                '{"m": {"input": "1", "output": 1}}', '{"m": 3}'):
        with pytest.raises(SettingsError) as exc:
            load_settings({"QUEUE_MODEL_PRICES": bad})
        assert str(exc.value).startswith("QUEUE_MODEL_PRICES") and "\n" not in str(exc.value)
    assert load_settings({"METRICS_TOKEN": f" {METRICS} "}).metrics_token == METRICS


def test_usage_range_is_whole_utc_days():
    today = date(2026, 11, 22)
    assert usage_range(None, None, today) == (datetime(2026, 10, 24, tzinfo=UTC),
                                              datetime(2026, 11, 23, tzinfo=UTC))
    assert usage_range("2026-11-01", "2026-11-01", today) == (
        datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
    for since, until in (("2026-11-02", "2026-11-01"), ("11/01/2026", None),
                         ("2024-01-01", "2026-01-01")):
        with pytest.raises(Invalid):
            usage_range(since, until, today)


def test_actor_and_adjusted_result_parsing():
    assert parse_actor(None) is None and parse_actor(" t-1 ") == "t-1"
    for bad in ("x" * 201, "a\nb"):
        with pytest.raises(Invalid):
            parse_actor(bad)
    assert parse_adjusted(None) is None and parse_adjusted({}) is None
    assert parse_adjusted({"result": {"score": 3}}) == {"score": 3}
    wrongs: list[object] = [[], {"result": 3}, {"other": 1}, {"result": {"x": "\u0000"}}]
    for wrong in wrongs:
        with pytest.raises(Invalid):
            parse_adjusted(wrong)


def test_sse_events_carry_progress_and_review():
    def event(status: str, summary: dict[str, object]) -> dict[str, object]:
        return MarkingEvent(EventCursor(1, 1), QueueId(uuid.uuid4()),
                            SubmissionId(uuid.uuid4()), status, summary).to_json()  # type: ignore[arg-type]

    beat = event("processing", {"progress": {"current": 1, "total": 2, "message": "m"}})
    assert beat["progress"] == {"current": 1, "total": 2, "message": "m"}
    reviewed = event("completed", {"score": 3, "review": "reverted"})
    assert reviewed["review"] == "reverted" and reviewed["result"] == {"score": 3}


@pytest.mark.parametrize("raw", ["inf", "-inf", "nan", "1e400", "Infinity"])
def test_a_teachers_score_that_is_no_number_is_refused(raw: str) -> None:
    with pytest.raises(Invalid, match="must be a number"):
        adjusted_result(raw, None)  # no max_score: no upper bound to catch it
    with pytest.raises(Invalid):
        adjusted_result(raw, {"score": 3, "max_score": 10})
    assert adjusted_result("7.5", None) == {"score": 7.5}
