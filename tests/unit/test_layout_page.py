"""The Layout page of the docs (docs/reference/layout.md) names every package and module of
aiqueue/, and every SQL file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs/reference/layout.md"


def layout_words() -> set[str]:
    section = PAGE.read_text().split("\n```\n", 1)[1].split("\n```\n", 1)[0]
    return set(re.findall(r"[A-Za-z0-9_]+", section))


def test_every_module_and_package_is_named() -> None:
    words = layout_words()
    unnamed = []
    for path in sorted((ROOT / "aiqueue").rglob("*")):
        if "__pycache__" in path.parts or path.name == "__init__.py":
            continue
        if path.is_dir() or path.suffix in (".py", ".sql"):
            name = path.stem if path.is_file() else path.name
            if name not in words:
                unnamed.append(str(path.relative_to(ROOT)))
    assert unnamed == [], f"docs/reference/layout.md names none of: {unnamed}"


def test_the_check_sees_a_missing_name() -> None:
    assert "no_such_module_here" not in layout_words()
    assert {"aiqueue", "queue", "loop", "settings"} <= layout_words()  # the section was found
