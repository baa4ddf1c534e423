"""The default pool's batch lane from the environment (§9f): read once, refused with a name."""

from __future__ import annotations

import pytest

from aiqueue.batch.lane import live_estimate
from aiqueue.batch_settings import load_batch
from aiqueue.errors import SettingsError
from aiqueue.settings import load_settings

BASE = {"QUEUE_BATCH_PROVIDER": "openai", "QUEUE_BATCH_MODEL": "gpt-4o-mini",
        "OPENAI_API_KEY": "sk-test"}


def test_no_provider_no_lane() -> None:
    assert load_batch({}) is None


def test_defaults_follow_the_provider() -> None:
    lane = load_batch(BASE)
    assert lane is not None
    assert (lane.base_url, lane.key_env, lane.api_key) == (
        "https://api.openai.com/v1", "OPENAI_API_KEY", "sk-test")
    assert (lane.margin_seconds, lane.price_factor) == (900.0, 0.5)
    other = load_batch({"QUEUE_BATCH_PROVIDER": "anthropic", "QUEUE_BATCH_MODEL": "m",
                        "QUEUE_BATCH_KEY_ENV": "MY_KEY", "MY_KEY": "sk-ant-xyz-secret"})
    assert other is not None and other.base_url == "https://api.anthropic.com"
    assert "sk-ant-xyz-secret" not in repr(other)  # the key never reaches a log line


@pytest.mark.parametrize("change, named", [
    ({"QUEUE_BATCH_PROVIDER": "gemini"}, "QUEUE_BATCH_PROVIDER"),
    ({"OPENAI_API_KEY": ""}, "OPENAI_API_KEY"),
    ({"QUEUE_BATCH_MODEL": ""}, "QUEUE_BATCH_MODEL"),
    ({"QUEUE_BATCH_BASE_URL": "ftp://x"}, "QUEUE_BATCH_BASE_URL"),
    ({"QUEUE_BATCH_FALLBACK_MARGIN_SECONDS": "soon"}, "QUEUE_BATCH_FALLBACK_MARGIN_SECONDS"),
    ({"QUEUE_BATCH_PRICE_FACTOR": "2"}, "QUEUE_BATCH_PRICE_FACTOR"),
])
def test_a_bad_setting_is_named(change: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        load_batch({**BASE, **change})


def test_a_native_dispatch_target_needs_the_functions_url_for_the_lane() -> None:
    env = {**BASE, "AI_MARKING_DISPATCH": "lambda", "AWS_REGION": "eu-west-1",
           "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s",
           "AI_MARKING_LAMBDA_FUNCTION": "mark"}
    with pytest.raises(SettingsError, match="AI_MARKING_FUNCTION_URL"):
        load_settings(env)


@pytest.mark.parametrize("rows, per_row, slots, expected", [
    (0, 10, 8, 0), (1, 10, 8, 10), (8, 10, 8, 10), (9, 10, 8, 20), (2000, 10, 8, 2500),
    (5, 10, 0, 10),  # unlimited: all at once
])
def test_the_live_estimate_is_rounds_of_slots(rows: int, per_row: float, slots: int,
                                              expected: float) -> None:
    assert live_estimate(rows, per_row, slots) == expected


def test_the_providers_url_must_be_https_outside_a_local_run() -> None:
    env = {**BASE, "VERCEL": "1", "VERCEL_PROJECT_PRODUCTION_URL": "app.example.com",
           "DATABASE_URL": "postgresql://u@db.example.org/x",
           "MARKING_QUEUE_SECRET": "unit-secret-0123456789abcdef",
           "AI_MARKING_FUNCTION_URL": "https://fn.example.org/mark"}
    assert load_settings(env).batch_lane is not None  # the provider's default is https
    with pytest.raises(SettingsError, match="QUEUE_BATCH_BASE_URL"):
        load_settings({**env, "QUEUE_BATCH_BASE_URL": "http://batch.example.com/v1"})
