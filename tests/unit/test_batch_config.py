"""A pool's batch lane from aiqueue.toml: read once, every bad key refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiqueue.batch.pack import live_estimate
from aiqueue.errors import SettingsError
from aiqueue.settings import Settings, load_settings

OPENAI = """
[pools.openai]
max_in_flight = 8
prices = { "gpt-4o-mini" = [0.15, 0.60] }
batch = "openai"
batch_key_env = "OPENAI_API_KEY"
batch_model = "gpt-4o-mini"
"""
ANTHROPIC = """
[pools.claude]
max_in_flight = 2
prices = { "claude-haiku-4-5" = [1.0, 5.0] }
batch = "anthropic"
batch_key_env = "MY_KEY"
batch_model = "claude-haiku-4-5"
batch_prices = { "claude-haiku-4-5" = [0.4, 2.0] }
"""
ENV = {"OPENAI_API_KEY": "sk-test", "MY_KEY": "sk-ant-xyz-secret"}


def load(tmp_path: Path, text: str, **env: str) -> Settings:
    path = tmp_path / "aiqueue.toml"
    path.write_text(text)
    return load_settings({**ENV, "AIQUEUE_CONFIG": str(path), **env})


def test_each_pool_names_its_own_batch_api(tmp_path: Path) -> None:
    s = load(tmp_path, OPENAI + ANTHROPIC)
    q = s.queue
    assert [p.name for p in q.batch_pools] == ["openai", "claude"]
    openai, claude = q.pools["openai"], q.pools["claude"]
    assert (openai.batch, openai.batch_base_url, openai.batch_api_key, openai.batch_model) == (
        "openai", "https://api.openai.com/v1", "sk-test", "gpt-4o-mini")
    assert (claude.batch, claude.batch_base_url) == ("anthropic", "https://api.anthropic.com")
    assert "sk-ant-xyz-secret" not in repr(claude)  # the key never reaches a log line
    assert q.pools["default"].batch is None  # no batch API unless declared
    # The batch price: declared, else half of live.
    assert q.batch_price("openai", "gpt-4o-mini") == (0.075, 0.30)
    assert q.batch_price("claude", "claude-haiku-4-5") == (0.4, 2.0)
    assert q.batch_price("openai", "unknown") is None
    assert s.batch_margin_seconds == 900.0


def test_the_default_pool_takes_a_batch_api_and_keeps_the_environments_limits(
        tmp_path: Path) -> None:
    text = ('[pools.default]\nbatch = "openai"\nbatch_key_env = "OPENAI_API_KEY"\n'
            'batch_model = "gpt-4o-mini"\n')
    s = load(tmp_path, text, QUEUE_MAX_IN_FLIGHT="3", QUEUE_BATCH_FALLBACK_MARGIN_SECONDS="60",
             QUEUE_MODEL_PRICES='{"gpt-4o-mini": {"input": 0.2, "output": 0.8}}')
    default = s.queue.pools["default"]
    assert (default.max_in_flight, default.batch, default.prices) == (
        3, "openai", {"gpt-4o-mini": (0.2, 0.8)})
    assert s.queue.batch_price("default", "gpt-4o-mini") == (0.1, 0.4)
    assert s.batch_margin_seconds == 60.0


@pytest.mark.parametrize("change, named", [
    (('batch = "openai"', 'batch = "gemini"'), "pools.openai.batch must be"),
    (('batch_key_env = "OPENAI_API_KEY"', 'batch_key_env = "UNSET_KEY"'),
     "pools.openai.batch_key_env names UNSET_KEY"),
    (('batch_model = "gpt-4o-mini"', ""), "pools.openai.batch_model is required"),
    (('batch_key_env = "OPENAI_API_KEY"', ""), "pools.openai.batch_key_env is required"),
    (('batch = "openai"', 'batch = "openai"\nbatch_base_url = "ftp://x"'),
     "pools.openai.batch_base_url"),
    (('batch = "openai"', 'batch = "openai"\nbatch_prices = { "gpt-4o-mini" = [1] }'),
     "pools.openai.batch_prices.gpt-4o-mini"),
    (('batch = "openai"', ""), "pools.openai.batch_key_env needs pools.openai.batch"),
])
def test_a_bad_batch_key_is_named(tmp_path: Path, change: tuple[str, str], named: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, OPENAI.replace(*change))
    assert named in str(caught.value), caught.value


def test_a_kinds_batch_lane_needs_its_pools_batch_api(tmp_path: Path) -> None:
    text = '[kinds.essay]\nfunction_url = "https://e.example/mark"\nlane = "batch"\n'
    with pytest.raises(SettingsError, match=r"kinds\.essay\.lane .* pools\.default\.batch"):
        load(tmp_path, text)
    assert load(tmp_path, OPENAI + text.replace("lane", 'pool = "openai"\nlane')).queue.kind(
        "essay").lane == "batch"


def test_a_bad_margin_is_named(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="QUEUE_BATCH_FALLBACK_MARGIN_SECONDS"):
        load(tmp_path, OPENAI, QUEUE_BATCH_FALLBACK_MARGIN_SECONDS="soon")


def test_a_native_dispatch_target_needs_the_functions_url_for_the_lane(tmp_path: Path) -> None:
    text = ('[pools.default]\nbatch = "openai"\nbatch_key_env = "OPENAI_API_KEY"\n'
            'batch_model = "gpt-4o-mini"\n')
    env = {"AI_MARKING_DISPATCH": "lambda", "AWS_REGION": "eu-west-1",
           "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s",
           "AI_MARKING_LAMBDA_FUNCTION": "mark"}
    with pytest.raises(SettingsError, match="AI_MARKING_FUNCTION_URL"):
        load(tmp_path, text, **env)
    kind = ('[kinds.code]\npool = "openai"\ndispatch = "lambda"\nlambda_function = "f"\n')
    with pytest.raises(SettingsError, match=r"kinds\.code\.function_url is required"):
        load(tmp_path, OPENAI + kind, **env)


@pytest.mark.parametrize("rows, per_row, slots, expected", [
    (0, 10, 8, 0), (1, 10, 8, 10), (8, 10, 8, 10), (9, 10, 8, 20), (2000, 10, 8, 2500),
    (5, 10, 0, 10),  # unlimited: all at once
])
def test_the_live_estimate_is_rounds_of_slots(rows: int, per_row: float, slots: int,
                                              expected: float) -> None:
    assert live_estimate(rows, per_row, slots) == expected


def test_the_providers_url_must_be_https_outside_a_local_run(tmp_path: Path) -> None:
    env = {"VERCEL": "1", "VERCEL_PROJECT_PRODUCTION_URL": "app.example.com",
           "DATABASE_URL": "postgresql://u@db.example.org/x",
           "MARKING_QUEUE_SECRET": "unit-secret-0123456789abcdef",
           "AI_MARKING_FUNCTION_URL": "https://fn.example.org/mark"}
    assert load(tmp_path, OPENAI, **env).queue.batch_pools  # the provider's default is https
    plain = OPENAI.replace('batch = "openai"',
                           'batch = "openai"\nbatch_base_url = "http://batch.example.com/v1"')
    with pytest.raises(SettingsError, match=r"pools\.openai\.batch_base_url"):
        load(tmp_path, plain, **env)
