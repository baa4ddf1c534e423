"""aiqueue.toml's fallback and timezone keys: read, checked, each error names
its key; the claim plan while a kind is on its fallback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiqueue.errors import SettingsError
from aiqueue.settings import Settings, toml_load

BASE = """
[pools.main]
max_in_flight = 2
timezone = "Europe/Berlin"

[pools.spare]
max_in_flight = 3

[kinds.essay]
pool = "main"
function_url = "http://essay.test/mark"
fallback = "mini"

[kinds.mini]
pool = "spare"
function_url = "http://mini.test/mark"
max_in_flight = 2
"""


def load(tmp_path: Path, text: str) -> Settings:
    """The settings with `text` as aiqueue.toml, its kinds and pools joined (checked)."""
    path = tmp_path / "aiqueue.toml"
    path.write_text(text)
    settings = Settings(queue_file=toml_load.load_file({}, path, local_run=True))
    assert settings.queue
    return settings


def test_a_fallback_is_read_with_its_default_wait(tmp_path: Path):
    path = tmp_path / "aiqueue.toml"
    path.write_text(BASE)
    file = toml_load.load_file({}, path, local_run=True)
    assert file is not None
    essay = file.kinds["essay"]
    assert essay.fallback == "mini" and essay.fallback_after_seconds == 120.0
    assert file.pools["main"].timezone == "Europe/Berlin"


@pytest.mark.parametrize(("change", "key"), [
    (('fallback = "mini"', 'fallback = "poetry"'), "kinds.essay.fallback"),
    (('[kinds.mini]\npool = "spare"', '[kinds.mini]\npool = "main"'), "kinds.essay.fallback"),
    (('fallback = "mini"', 'fallback = "mini"\nfallback_after_seconds = -1'),
     "kinds.essay.fallback_after_seconds"),
    (('fallback = "mini"\n', 'fallback_after_seconds = 5\n'),
     "kinds.essay.fallback_after_seconds"),
    (('timezone = "Europe/Berlin"', 'timezone = "Europe/Atlantis"'), "pools.main.timezone"),
])
def test_a_bad_fallback_or_zone_stops_start_up_naming_its_key(
        tmp_path: Path, change: tuple[str, str], key: str):
    with pytest.raises(SettingsError, match=key.replace(".", r"\.")):
        load(tmp_path, BASE.replace(*change))


def test_the_plan_lists_a_kind_on_its_fallback_in_the_fallbacks_pool(tmp_path: Path):
    settings = load(tmp_path, BASE)
    plan = settings.claim_plan
    assert plan.with_away(settings.queue, frozenset()) is plan
    away = plan.with_away(settings.queue, frozenset({"essay"}))
    kinds = {k["name"]: k for k in json.loads(away.json)["kinds"]}
    assert kinds["essay"] == {"name": "essay", "pool": "spare", "cap": 2, "runs_as": "mini"}
    assert kinds["mini"]["pool"] == "spare"
    assert plan.with_away(settings.queue, frozenset({"essay"})) is away
