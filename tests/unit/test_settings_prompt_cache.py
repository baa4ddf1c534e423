"""A pool's prompt cache settings (docs/prompt-cache.md): the file's table, the default pool's
variables, and a bad value named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiqueue.errors import SettingsError
from aiqueue.settings import Settings, load_settings
from aiqueue.settings.prompt_cache import PromptCache


def _load(tmp_path: Path, text: str, **env: str) -> Settings:
    path = tmp_path / "aiqueue.toml"
    path.write_text(text)
    return load_settings({"AIQUEUE_CONFIG": str(path), **env})


def test_a_pool_declares_its_prompt_cache(tmp_path: Path) -> None:
    s = _load(tmp_path, """
[pools.openai]
max_in_flight = 8
[pools.openai.prompt_cache]
ttl_seconds = 600
min_tokens = 2048
write = 1.25
read = 0.1
key_rpm = 15
fair_quantum = 20000
""")
    pool = s.queue.pools["openai"]
    assert pool.prompt_cache == PromptCache(600.0, 2048, 1.25, 0.1, 15, 20000.0)
    plan = {p["name"]: p for p in json.loads(s.queue.plan)["pools"]}
    assert plan["openai"]["cache"] == {"ttl": 600.0, "min": 2048, "quantum": 20000.0,
                                       "key_rpm": 15}
    # The defaults: 5 minutes, 1,024 tokens, writes at the input price, reads at a tenth.
    assert plan["default"]["cache"] == {"ttl": 300.0, "min": 1024, "quantum": None,
                                        "key_rpm": None}


def test_the_default_pool_reads_its_variables_and_ttl_zero_schedules_as_before() -> None:
    s = load_settings({"QUEUE_PROMPT_CACHE_TTL_SECONDS": "0",
                       "QUEUE_PROMPT_CACHE_MIN_TOKENS": "4096"})
    cache = s.queue.pools["default"].prompt_cache
    assert (cache.ttl_seconds, cache.min_tokens, cache.on) == (0.0, 4096, False)
    assert json.loads(s.queue.plan)["pools"][0]["cache"] is None


def test_billed_input_counts_writes_and_reads_at_their_price() -> None:
    cache = PromptCache(write=1.25, read=0.1)
    assert cache.billed(2400, 2000, 0) == pytest.approx(600)
    assert cache.billed(2400, 0, 2000) == pytest.approx(2900)
    assert cache.billed(2400, 0, 0) == 2400


@pytest.mark.parametrize(("line", "named"), [
    ("ttl_seconds = -1", "pools.default.prompt_cache.ttl_seconds"),
    ("read = \"cheap\"", "pools.default.prompt_cache.read"),
    ("key_rpm = 0", "pools.default.prompt_cache.key_rpm"),
    ("fair_quantum = 0", "pools.default.prompt_cache.fair_quantum"),
    ("ttl = 300", "pools.default.prompt_cache.ttl"),
])
def test_a_bad_value_stops_start_up_naming_it(tmp_path: Path, line: str, named: str) -> None:
    with pytest.raises(SettingsError, match=named.replace(".", r"\.")):
        _load(tmp_path, f"[pools.default.prompt_cache]\n{line}\n")


def test_a_bad_variable_is_named() -> None:
    with pytest.raises(SettingsError, match="QUEUE_PROMPT_CACHE_MIN_TOKENS"):
        load_settings({"QUEUE_PROMPT_CACHE_MIN_TOKENS": "lots"})
