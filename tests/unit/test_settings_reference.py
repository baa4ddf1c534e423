"""The lists the configuration reference is generated from: every variable and key, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiqueue.errors import SettingsError
from aiqueue.settings import EnvField, env_fields, load_settings, toml_keys


def test_every_table_variable_is_listed_once_with_its_default_and_check() -> None:
    found = list(env_fields())
    names = [f.name for f in found]
    assert len(names) == len(set(names)) and len(names) > 30
    by_name = {f.name: f for f in found}
    assert by_name["QUEUE_MAX_ATTEMPTS"] == EnvField(
        "QUEUE_MAX_ATTEMPTS", "max_attempts", 3, "an integer >= 1")
    assert by_name["QUEUE_EVENTS_MAX_SECONDS"].check == "a number from 0.05 to 3600; 55.0 on Vercel"
    assert by_name["QUEUE_USD_PER_DAY"].default is None
    assert by_name["QUEUE_MODEL_PRICES"].check.startswith("Prices by model")
    assert all(f.check for f in found)


def test_each_listed_default_is_what_an_empty_environment_loads() -> None:
    s = load_settings({})
    for f in env_fields():
        assert getattr(s, f.field) == f.default, f.name


@pytest.mark.parametrize("table", ["pools", "kinds", "pools.prompt_cache"])
def test_the_toml_keys_are_the_ones_the_file_accepts(tmp_path: Path, table: str) -> None:
    path = tmp_path / "aiqueue.toml"
    header = "pools.default.prompt_cache" if table == "pools.prompt_cache" else f"{table}.x"
    path.write_text(f"[{header}]\nno_such_key = 1\n")
    with pytest.raises(SettingsError) as caught:
        load_settings({"AIQUEUE_CONFIG": str(path)})
    assert f"(known: {', '.join(toml_keys()[table])})" in str(caught.value)
