"""aiqueue.toml (docs/concepts.md): what it declares, and every bad file refused with its key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiqueue import paths
from aiqueue.errors import SettingsError
from aiqueue.settings import load_settings, toml_load

GOOD = """
[pools.openai]
max_in_flight = 8
tokens_per_minute = 450000
requests_per_minute = 5000
prices = { "gpt-4o-mini" = [0.15, 0.60] }
group_usd_per_hour = 2.5
pool_usd_per_day = 40
batch = "openai"
batch_base_url = "https://api.openai.com/v1"
batch_key_env = "OPENAI_API_KEY"
batch_model = "gpt-4o-mini"

[kinds.essay]
pool = "openai"
dispatch = "http"
function_url = "https://essay.example/mark"
token_env = "ESSAY_FUNCTION_TOKEN"
max_in_flight = 4
max_attempts = 2
lane = "batch"

[kinds.short]
function_url = "https://short.example/mark"
"""
ENV = {"ESSAY_FUNCTION_TOKEN": "t-essay-0123456789", "OPENAI_API_KEY": "sk-x"}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "aiqueue.toml"
    path.write_text(text)
    return path


def test_a_file_declares_kinds_and_pools_beside_the_default_ones(tmp_path: Path) -> None:
    env = {**ENV, "AIQUEUE_CONFIG": str(write(tmp_path, GOOD)), "QUEUE_MAX_IN_FLIGHT": "2"}
    q = load_settings(env).queue
    assert sorted(q.pools) == ["default", "openai"]
    assert sorted(q.kinds) == ["essay", "mark", "short"]
    openai, essay = q.pools["openai"], q.kind("essay")
    assert (openai.max_in_flight, openai.tokens_per_minute, openai.requests_per_minute) == (
        8, 450000, 5000)
    assert openai.prices == {"gpt-4o-mini": (0.15, 0.60)}
    assert (openai.group_usd_per_hour, openai.group_usd_per_day, openai.pool_usd_per_day) == (
        2.5, None, 40.0)
    assert (openai.batch, openai.batch_key_env, openai.batch_model) == (
        "openai", "OPENAI_API_KEY", "gpt-4o-mini")
    assert essay.function_token == ENV["ESSAY_FUNCTION_TOKEN"] and essay.token_env
    assert (essay.max_in_flight, essay.max_attempts, essay.lane) == (4, 2, "batch")
    # A kind without a pool is the default pool's, whose cap is QUEUE_MAX_IN_FLIGHT.
    assert q.kind("short").pool == "default" and q.pools["default"].max_in_flight == 2
    plan = json.loads(q.plan)
    assert {"name": "essay", "pool": "openai", "cap": 4} in plan["kinds"]
    assert {"name": "openai", "cap": 8, "tpm": 450000, "rpm": 5000,
            "cache": {"ttl": 300.0, "min": 1024, "quantum": None, "key_rpm": None}
            } in plan["pools"]
    assert json.loads(q.attempts) == {"essay": 2}


def test_each_kind_dispatches_with_its_own_function(tmp_path: Path) -> None:
    env = {**ENV, "AIQUEUE_CONFIG": str(write(tmp_path, GOOD)),
           "AI_MARKING_FUNCTION_TOKEN": "default-token-0123"}
    s = load_settings(env)
    essay = s.target("essay")
    assert s.target("mark") != essay and s.target("essay") is essay  # built once
    assert (essay.kind, essay.function_url, essay.function_token) == (
        "essay", "https://essay.example/mark", ENV["ESSAY_FUNCTION_TOKEN"])
    # A kind with no token_env sends none: never the default kind's token.
    assert s.target("short").function_token is None
    assert s.target("mark").function_token == "default-token-0123"
    assert s.target() is s.target("mark")
    with pytest.raises(KeyError):
        s.target("poetry")


def test_no_file_is_todays_queue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    s = load_settings({"QUEUE_MAX_IN_FLIGHT": "3"})
    assert s.queue_file is None and s.queue.single
    t = s.target()
    assert (t.kind, t.dispatch, t.function_url, t.function_token, t.callback_url) == (
        "mark", s.dispatch_target, s.function_url, s.function_token, s.callback_url)
    assert json.loads(s.queue.plan) == {
        "pools": [{"name": "default", "cap": 3, "tpm": 0, "rpm": 0,
                   "cache": {"ttl": 300.0, "min": 1024, "quantum": None, "key_rpm": None}}],
        "kinds": [{"name": "mark", "pool": "default", "cap": 0}]}


def test_aiqueue_toml_at_the_apps_root_is_read_without_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, GOOD)
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    assert "essay" in load_settings(ENV).queue.kinds
    assert toml_load.config_path({}, tmp_path / "elsewhere") is None


@pytest.mark.parametrize(("text", "env", "named"), [
    ("[pools.x\nmax_in_flight = 1", ENV, "not valid TOML"),
    ('[kinds.a]\npool = "nowhere"\nfunction_url = "https://a.example"', ENV, "kinds.a.pool"),
    ('[kinds.a]\nfunction_url = "https://a.example"\ntoken_env = "A_TOKEN"', {}, "A_TOKEN"),
    ('[kinds.a]\nfunction_url = "https://a.example"\nmax_inflight = 2', ENV,
     "kinds.a.max_inflight"),
    ('[kinds.a]\ndispatch = "smtp"\nfunction_url = "https://a.example"', ENV,
     "kinds.a.dispatch"),
    ("[kinds.a]\nmax_in_flight = 2", ENV, "kinds.a.function_url"),
    ('[kinds.A]\nfunction_url = "https://a.example"', ENV, "kinds.'A'"),
    ("[pools.p]\ntokens_per_minute = 5", ENV, "pools.p.max_in_flight"),
    ("[pools.p]\nmax_in_flight = -1", ENV, "pools.p.max_in_flight"),
    ('[pools.p]\nmax_in_flight = 1\nprices = { m = [1] }', ENV, "pools.p.prices.m"),
    ('[pools.p]\nmax_in_flight = 1\ngroup_usd_per_day = "lots"', ENV,
     "pools.p.group_usd_per_day"),
    ('[pools.p]\nmax_in_flight = 1\nbatch = "openai"\nbatch_key_env = "NOPE"\n'
     'batch_model = "m"', ENV, "pools.p.batch_key_env names NOPE"),
    ('[kinds.a]\ndispatch = "lambda"\nlambda_function = "f"', ENV, "kinds.a: AWS_REGION"),
    ("[queues.x]\na = 1", ENV, "'queues'"),
])
def test_a_bad_file_stops_start_up_naming_the_key(
    tmp_path: Path, text: str, env: dict[str, str], named: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SettingsError) as caught:
        load_settings({**env, "AIQUEUE_CONFIG": str(path)})
    message = str(caught.value)
    assert named in message and "\n" not in message.strip(), message


def test_a_missing_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="AIQUEUE_CONFIG"):
        load_settings({"AIQUEUE_CONFIG": str(tmp_path / "nope.toml")})


def test_kinds_of_other_targets_reuse_the_targets_checks(tmp_path: Path) -> None:
    text = ('[kinds.code]\ndispatch = "digitalocean"\ndo_namespace = "fn-1234"\n'
            'do_action = "grade/run"\ntoken_env = "CODE_DO_AUTH"\n')
    env = {"AIQUEUE_CONFIG": str(write(tmp_path, text)), "CODE_DO_AUTH": "u:s",
           "DO_FUNCTIONS_API_HOST": "https://faas.example"}
    kind = toml_load.load_file(env, Path(env["AIQUEUE_CONFIG"]))
    assert kind is not None
    target = kind.kind("code").digitalocean
    assert target is not None
    assert (target.namespace, target.package, target.action, target.user) == (
        "fn-1234", "grade", "run", "u")


def test_a_model_priced_differently_by_two_pools_is_refused(tmp_path: Path) -> None:
    text = ('[pools.a]\nmax_in_flight = 1\nprices = { m = [1, 2] }\n'
            '[pools.b]\nmax_in_flight = 1\nprices = { m = [1, 3] }\n')
    with pytest.raises(SettingsError, match=r"pools\.b\.prices\.m"):
        load_settings({"AIQUEUE_CONFIG": str(write(tmp_path, text))})
    same = text.replace("[1, 3]", "[1, 2]")
    s = load_settings({"AIQUEUE_CONFIG": str(write(tmp_path, same)),
                       "QUEUE_MODEL_PRICES": '{"n": {"input": 1, "output": 1}}'})
    assert s.all_model_prices["m"].output == 2 and s.all_model_prices["n"].input == 1


def test_the_default_pool_takes_its_spend_caps_from_the_environment() -> None:
    # A cap needs a price (docs/concepts.md).
    s = load_settings({"QUEUE_GROUP_USD_PER_HOUR": "1.5", "QUEUE_USD_PER_DAY": "20",
                       "QUEUE_MODEL_PRICES": '{"m": {"input": 1, "output": 2}}'})
    default = s.queue.pools["default"]
    assert (default.group_usd_per_hour, default.group_usd_per_day,
            default.pool_usd_per_day) == (1.5, None, 20.0)
    with pytest.raises(SettingsError, match="QUEUE_GROUP_USD_PER_DAY"):
        load_settings({"QUEUE_GROUP_USD_PER_DAY": "lots"})


def test_a_kinds_function_gets_https_outside_dev(tmp_path: Path) -> None:
    path = write(tmp_path, '[kinds.a]\nfunction_url = "http://marker.example/mark"\n')
    with pytest.raises(SettingsError, match=r"kinds\.a\.function_url must be an https://"):
        toml_load.load_file({}, path)
    assert toml_load.load_file({}, path, local_run=True) is not None  # dev may use http://
    local = write(tmp_path, '[kinds.a]\nfunction_url = "http://127.0.0.1:8001/mark"\n')
    assert toml_load.load_file({}, local) is not None


@pytest.mark.parametrize(("key", "name"), [
    ("token_env", "MARKING_QUEUE_SECRET"), ("token_env", "DATABASE_URL"),
    ("token_env", "CRON_SECRET"), ("token_env", "aws_secret_access_key"),
    ("token_env", "DO_FUNCTIONS_AUTH"),  # an http kind: it would be a bearer
    ("batch_key_env", "MARKING_QUEUE_SECRET"), ("batch_key_env", "METRICS_TOKEN"),
])
def test_a_key_variable_may_not_name_the_apps_own_secrets(tmp_path: Path, key: str,
                                                          name: str) -> None:
    text = GOOD.replace('"ESSAY_FUNCTION_TOKEN"' if key == "token_env" else '"OPENAI_API_KEY"',
                        f'"{name}"')
    env = {**ENV, "AIQUEUE_CONFIG": str(write(tmp_path, text)),
           "MARKING_QUEUE_SECRET": "unit-secret-0123456789abcdef",
           "DATABASE_URL": "postgresql://u@db.example.org/x"}
    env.setdefault(name, "x" * 20)
    with pytest.raises(SettingsError) as caught:
        load_settings(env)
    message = str(caught.value)
    assert "\n" not in message and name in message and f".{key}" in message, message


def test_a_digitalocean_kinds_namespace_key_is_never_a_bearer(tmp_path: Path) -> None:
    text = ('[pools.default]\nbatch = "openai"\nbatch_key_env = "OPENAI_API_KEY"\n'
            'batch_model = "gpt-4o-mini"\n'
            '[kinds.code]\ndispatch = "digitalocean"\ndo_namespace = "fn-1234"\n'
            'do_action = "grade/run"\ntoken_env = "CODE_DO_AUTH"\n'
            'function_url = "https://faas.example/api/v1/web/fn-1234/grade/run"\n')
    env = {**ENV, "AIQUEUE_CONFIG": str(write(tmp_path, text)), "CODE_DO_AUTH": "uuid:key",
           "DO_FUNCTIONS_API_HOST": "https://faas.example",
           "AI_MARKING_FUNCTION_TOKEN": "fn-token-0123456789"}
    target = load_settings(env).target("code")
    assert target.digitalocean is not None and target.digitalocean.secret == "key"
    # Render and parse go to the kind's own web URL with the function's token.
    assert target.function_url.endswith("/grade/run")
    assert target.function_token == "fn-token-0123456789"
    without = load_settings({k: v for k, v in env.items() if k != "AI_MARKING_FUNCTION_TOKEN"})
    assert without.target("code").function_token is None


def test_a_kind_may_mark_each_answer(tmp_path: Path) -> None:
    text = GOOD.replace('lane = "batch"', 'lane = "batch"\nsame_answers = "mark_each"')
    q = load_settings({**ENV, "AIQUEUE_CONFIG": str(write(tmp_path, text))}).queue
    assert q.kind("essay").same_answers == "mark_each"
    assert q.kind("short").same_answers == "mark_once"
    bad = GOOD.replace('lane = "batch"', 'lane = "batch"\nsame_answers = "once"')
    with pytest.raises(SettingsError, match=r"kinds\.essay\.same_answers"):
        load_settings({**ENV, "AIQUEUE_CONFIG": str(write(tmp_path, bad))})


@pytest.mark.parametrize("choice", ["loose", "off", "mark_once"])
def test_a_kind_chooses_how_answers_compare(tmp_path: Path, choice: str) -> None:
    text = GOOD.replace('lane = "batch"', f'lane = "batch"\nsame_answers = "{choice}"')
    q = load_settings({**ENV, "AIQUEUE_CONFIG": str(write(tmp_path, text))}).queue
    assert q.kind("essay").same_answers == choice
    bad = GOOD.replace('lane = "batch"', 'lane = "batch"\nsame_answers = "strict"')
    with pytest.raises(SettingsError, match=r'"mark_once", "loose" or "off"'):
        load_settings({**ENV, "AIQUEUE_CONFIG": str(write(tmp_path, bad))})


def test_a_kind_may_say_how_long_a_row_takes_before_any_has(tmp_path: Path) -> None:
    text = GOOD.replace('lane = "batch"', 'lane = "batch"\nexpected_seconds = 45')
    q = load_settings({**ENV, "AIQUEUE_CONFIG": str(write(tmp_path, text))}).queue
    assert q.kind("essay").expected_seconds == 45.0 and q.kind("short").expected_seconds is None
    for bad in ("0", "-1", '"fast"', "true", "86400"):
        broken = GOOD.replace('lane = "batch"', f'lane = "batch"\nexpected_seconds = {bad}')
        with pytest.raises(SettingsError, match=r"kinds\.essay\.expected_seconds"):
            load_settings({**ENV, "AIQUEUE_CONFIG": str(write(tmp_path, broken))})
