"""Settings read once from the environment: defaults, validation, production rules."""

from __future__ import annotations

import dataclasses

import pytest

from aiqueue.errors import SettingsError
from aiqueue.settings import Settings, load_settings

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


@pytest.mark.parametrize("cap", ["QUEUE_GROUP_USD_PER_HOUR", "QUEUE_GROUP_USD_PER_DAY",
                                 "QUEUE_USD_PER_DAY"])
def test_a_spend_cap_without_any_price_refuses_start_up_naming_the_price_setting(cap: str):
    with pytest.raises(SettingsError, match=r"^QUEUE_MODEL_PRICES .*" + cap):
        load_settings({"MARKING_QUEUE_SECRET": SECRET, cap: "5"})


def test_spend_caps_with_prices_are_read_and_a_bad_one_names_itself():
    prices = '{"gpt-4o-mini": {"input": 0.15, "output": 0.6}}'
    s = load_settings({"MARKING_QUEUE_SECRET": SECRET, "QUEUE_MODEL_PRICES": prices,
                       "QUEUE_GROUP_USD_PER_HOUR": "2.5", "QUEUE_USD_PER_DAY": "100"})
    assert (s.group_usd_per_hour, s.group_usd_per_day, s.pool_usd_per_day) == (2.5, None, 100.0)
    with pytest.raises(SettingsError, match="QUEUE_GROUP_USD_PER_DAY"):
        load_settings({"MARKING_QUEUE_SECRET": SECRET, "QUEUE_MODEL_PRICES": prices,
                       "QUEUE_GROUP_USD_PER_DAY": "-1"})


def test_a_toml_pool_with_a_cap_and_no_price_refuses_start_up_naming_its_prices(tmp_path):
    toml = tmp_path / "aiqueue.toml"
    toml.write_text('[pools.openai]\nmax_in_flight = 4\ngroup_usd_per_hour = 5\n\n'
                    '[kinds.essay]\npool = "openai"\nfunction_url = "http://127.0.0.1:9/"\n')
    with pytest.raises(SettingsError, match=r"^pools\.openai\.prices .*group_usd_per_hour"):
        load_settings({"MARKING_QUEUE_SECRET": SECRET, "AIQUEUE_CONFIG": str(toml)})


# The table: every Settings field read from one variable names it in its metadata.
TABLE = [f for f in dataclasses.fields(Settings) if "env" in f.metadata]
# Tokens are taken as they are: no value is wrong.
TOKENS = {"AI_MARKING_FUNCTION_TOKEN", "VERCEL_OIDC_TOKEN"}


def test_the_table_names_each_variable_once():
    names = [f.metadata["env"] for f in TABLE]
    assert len(names) > 30 and len(set(names)) == len(names)
    assert {"QUEUE_MAX_ATTEMPTS", "QUEUE_MODEL_PRICES", "CRON_SECRET"} <= set(names)


def test_an_unset_variable_leaves_the_fields_default():
    s = load_settings({"MARKING_QUEUE_SECRET": SECRET})
    for f in TABLE:
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        assert getattr(s, f.name) == default, f.metadata["env"]


@pytest.mark.parametrize("name", sorted(f.metadata["env"] for f in TABLE
                                        if f.metadata["env"] not in TOKENS))
def test_every_variable_in_the_table_refuses_a_bad_value_in_one_line_naming_it(name: str):
    with pytest.raises(SettingsError) as info:
        load_settings({"MARKING_QUEUE_SECRET": SECRET, name: "many"})
    assert info.value.detail.startswith(name) and "\n" not in info.value.detail


def test_a_number_keeps_its_bounds_and_its_vercel_default():
    env = {"MARKING_QUEUE_SECRET": SECRET}
    assert load_settings({**env, "QUEUE_MAX_IN_FLIGHT": "0"}).max_in_flight == 0
    with pytest.raises(SettingsError, match="^QUEUE_ALERT_FAILURE_RATE .*between 0.0 and 1.0"):
        load_settings({**env, "QUEUE_ALERT_FAILURE_RATE": "1.5"})
    assert load_settings({**env, "QUEUE_EVENTS_HEARTBEAT_SECONDS": "40"}
                         ).events_heartbeat_seconds == 15
    vercel = {**env, "VERCEL": "1", "VERCEL_ENV": "development",
              "DATABASE_URL": "postgresql://x/y", "AI_MARKING_FUNCTION_URL": "http://127.0.0.1:9/"}
    assert load_settings(vercel).events_max_seconds == 55
    assert load_settings({**vercel, "QUEUE_EVENTS_MAX_SECONDS": "70"}).events_max_seconds == 70
