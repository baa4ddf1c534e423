"""The rule for the learned in-flight limit L (aiqueue/flow.py), as a table.

The same tables run through the database's copy of the rule in
tests/integration/test_flow.py: the two must agree.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from aiqueue import flow
from aiqueue.errors import SettingsError
from aiqueue.settings import Settings, load_settings
from tests.unit.flow_cases import REFUSAL_CASES, RESULT_CASES


@pytest.mark.parametrize(("limit", "top", "in_flight", "same_burst", "expected"),
                         REFUSAL_CASES)
def test_a_refusal_halves_the_limit_once_per_burst(
    limit: int | None, top: int, in_flight: int, same_burst: bool, expected: int | None
) -> None:
    assert flow.after_refusal(limit, top, in_flight, same_burst) == expected


@pytest.mark.parametrize(("limit", "clean", "top", "paced", "expected"), RESULT_CASES)
def test_results_without_refusals_raise_the_limit_by_one_per_round(
    limit: int | None, clean: int, top: int, paced: bool, expected: tuple[int | None, int]
) -> None:
    assert flow.after_result(limit, clean, top, paced) == expected


def test_the_window_is_learned_from_retry_after_and_the_budgets_reset() -> None:
    assert flow.learned_window(None, None) is None
    assert flow.learned_window(0.3, None) == 0.3
    assert flow.learned_window(0.3, 9.7) == 9.7  # retry-after-ms, and the whole budget's reset
    assert flow.learned_window(None, 60.0) == 60.0
    assert flow.learned_window(None, 86400.0) == 60.0  # a daily cap's reset paces no more
    now = datetime(2026, 11, 27, 12, tzinfo=UTC)
    assert flow.paced(now - timedelta(seconds=5), 10.0, now)
    assert not flow.paced(now - timedelta(seconds=11), 10.0, now)
    assert not flow.paced(now, None, now) and not flow.paced(None, 10.0, now)


def test_the_limit_climbs_back_additively_and_falls_multiplicatively() -> None:
    limit: int | None = None
    limit = flow.after_refusal(limit, 8, 8, False)
    assert limit == 4
    clean, seen = 0, []
    for _ in range(4 + 5 + 6 + 7):
        limit, clean = flow.after_result(limit, clean, 8)
        seen.append(limit)
    # One step per L results: 4 results at 4, 5 at 5, 6 at 6, 7 at 7, then the ceiling.
    assert seen[3] == 5 and seen[8] == 6 and seen[14] == 7 and seen[-1] is None


def test_the_ceiling_is_the_cap_or_a_sane_bound_when_unlimited() -> None:
    assert flow.ceiling(8) == 8 and flow.ceiling(1) == 1
    assert flow.ceiling(0) == flow.UNLIMITED_CEILING == 64


def test_a_budget_is_declared_by_either_rate_and_the_claim_plan_carries_it() -> None:
    settings = Settings(tokens_per_minute=6000, requests_per_minute=0,
                        budget_window_seconds=10, breaker_threshold=3)
    assert settings.queue.pools["default"].budget_declared
    doc = json.loads(settings.claim_plan.json)
    assert doc["pools"] == [{"name": "default", "cap": 1, "tpm": 6000, "rpm": 0,
                             "budgeted": True, "cache": {"ttl": 300.0, "min": 1024,
                                                         "quantum": None, "key_rpm": None}}]
    assert (doc["budgeted"], doc["window"], doc["breaker_threshold"]) == (True, 10, 3)
    assert settings.claim_plan is settings.claim_plan  # built once per settings
    assert json.loads(settings.claim_plan.stalled.json)["pools"][0]["cap"] == 1
    rpm = Settings(tokens_per_minute=0, requests_per_minute=60)
    assert json.loads(rpm.claim_plan.json)["budgeted"]
    assert not json.loads(Settings().claim_plan.json)["budgeted"]


def test_the_flow_variables_are_read_and_checked() -> None:
    s = load_settings({"QUEUE_TOKENS_PER_MINUTE": "90000", "QUEUE_REQUESTS_PER_MINUTE": "500",
                       "QUEUE_BUDGET_WINDOW_SECONDS": "10", "QUEUE_REFUSED_GIVE_UP_SECONDS": "60"})
    assert (s.tokens_per_minute, s.requests_per_minute) == (90000, 500)
    assert (s.budget_window_seconds, s.refused_give_up_seconds) == (10.0, 60.0)
    defaults = load_settings({})
    assert not defaults.queue.pools["default"].budget_declared
    assert defaults.refused_give_up_seconds == 86400
    for name, value in (("QUEUE_TOKENS_PER_MINUTE", "-1"), ("QUEUE_REQUESTS_PER_MINUTE", "x"),
                        ("QUEUE_BUDGET_WINDOW_SECONDS", "0"),
                        ("QUEUE_BUDGET_WINDOW_SECONDS", "7200"),
                        ("QUEUE_REFUSED_GIVE_UP_SECONDS", "-5")):
        with pytest.raises(SettingsError, match=name):
            load_settings({name: value})
