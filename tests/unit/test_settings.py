"""Settings read once from the environment: defaults, validation, production rules."""

from __future__ import annotations

import pytest

from aiqueue.errors import SettingsError
from aiqueue.settings import load_settings

SECRET = "unit-secret-0123456789abcdef"


def test_defaults_match_the_contract():
    s = load_settings({"MARKING_QUEUE_SECRET": SECRET}, port=9000)
    assert (s.max_attempts, s.max_in_flight, s.stuck_after_seconds) == (3, 1, 600)
    assert (s.prune_after_days, s.retry_base_seconds, s.retry_max_seconds) == (7, 10, 300)
    assert s.dispatch_timeout_seconds == 10 and s.function_mode == "async"
    assert s.app_base_url == "http://127.0.0.1:9000"
    assert s.callback_url == "http://127.0.0.1:9000/webhooks/ai-mark"
    assert s.admin_password == SECRET
    assert (s.retain_ended_days, s.retain_history_days) == (30, 365)


def test_dev_generates_a_secret_and_production_requires_one():
    s = load_settings({})
    assert s.secret_generated and len(s.queue_secret) >= 16
    with pytest.raises(SettingsError, match="MARKING_QUEUE_SECRET"):
        load_settings({"AIQUEUE_ENV": "production", "DATABASE_URL": "postgresql://x/y",
                       "AI_MARKING_FUNCTION_URL": "https://fn"})


@pytest.mark.parametrize(("name", "value"), [
    ("QUEUE_MAX_IN_FLIGHT", "-1"), ("QUEUE_MAX_ATTEMPTS", "three"),
    ("QUEUE_RETRY_BASE_SECONDS", "nan"), ("AI_MARKING_FUNCTION_MODE", "batch"),
    ("AI_MARKING_FUNCTION_URL", "ftp://x"), ("DATABASE_URL", "mysql://x"),
    ("QUEUE_DISPATCH_TIMEOUT_SECONDS", "0"), ("MARKING_QUEUE_SECRET", "short"),
    ("QUEUE_RETAIN_ENDED_DAYS", "-1"), ("QUEUE_RETAIN_HISTORY_DAYS", "forever"),
])
def test_a_bad_setting_names_its_variable(name: str, value: str):
    env = {"MARKING_QUEUE_SECRET": SECRET, name: value}
    with pytest.raises(SettingsError) as info:
        load_settings(env)
    assert name in info.value.detail
    assert "\n" not in info.value.detail


def test_floats_are_allowed_for_backoff():
    s = load_settings({"MARKING_QUEUE_SECRET": SECRET, "QUEUE_RETRY_BASE_SECONDS": "0.5"})
    assert s.retry_base_seconds == 0.5
