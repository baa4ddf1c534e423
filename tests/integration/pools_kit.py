"""Three kinds in two pools (docs/concepts.md), shared by the pool tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiqueue.settings import Settings, toml_load
from tests.conftest import make_settings

TOML = """
[pools.alpha]
max_in_flight = 3

[pools.beta]
max_in_flight = 4

[kinds.short]
pool = "alpha"
function_url = "http://short.test/mark"
max_in_flight = 2

[kinds.essay]
pool = "alpha"
function_url = "http://essay.test/mark"
token_env = "ESSAY_TOKEN"

[kinds.code]
pool = "beta"
function_url = "http://code.test/mark"
max_in_flight = 2
max_attempts = 5
"""
ENV = {"ESSAY_TOKEN": "essay-token-0123456789"}
URLS = {"short": "http://short.test/mark", "essay": "http://essay.test/mark",
        "code": "http://code.test/mark"}
POOL_CAPS = {"alpha": 3, "beta": 4, "default": 1}
KIND_CAPS = {"short": 2, "code": 2}


def pools_settings(db_url: str, tmp_path: Path, **overrides: Any) -> Settings:
    """Test settings with the three kinds declared in a file."""
    path = tmp_path / "aiqueue.toml"
    path.write_text(TOML)
    file = toml_load.load_file(ENV, path, local_run=True)  # the test hosts are not https
    return make_settings(db_url, queue_file=file, **overrides)
