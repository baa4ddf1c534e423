"""The documentation: the generated reference pages are current, every setting is described,
the site builds with `mkdocs build --strict`, and no page speaks of the project's history."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md"))


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    return load("docs_reference")


def test_the_generated_pages_are_current(reference):
    stale = [str(p.relative_to(ROOT)) for p in reference.stale()]
    assert stale == [], f"{stale} differ from the code: run python scripts/docs_reference.py"


def test_a_stale_page_is_seen(reference, tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("what the code said yesterday\n")
    monkeypatch.setattr(reference, "PAGES", {page: lambda: "what the code says today\n",
                                             tmp_path / "missing.md": lambda: ""})
    assert reference.stale() == [page, tmp_path / "missing.md"]


def test_every_variable_the_settings_read_is_described(reference):
    read = reference.variables_in_source() | set(reference.table_defaults())
    described = set(load("docs_settings").VARIABLES)
    assert sorted(read - described) == [], "described in scripts/docs_settings.py: none"
    assert sorted(described - read) == [], "described but no longer read"


def test_every_toml_key_is_described(reference):
    keys = {table: set(found) for table, found in reference.toml_keys().items()}
    described = {table: set(found) for table, found in load("docs_settings").KEYS.items()}
    assert keys == described


def test_the_reference_gives_each_check_the_code_makes(reference):
    page = (ROOT / "docs/reference/configuration.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `QUEUE_MAX_ATTEMPTS`"))
    assert "`3`" in row and "must be >= 1" in row
    row = next(line for line in page.splitlines() if line.startswith("| `max_in_flight`"))
    assert "must be a whole number >= 0" in row


def test_the_site_builds_without_a_warning(tmp_path):
    # Not skipped when mkdocs is missing: requirements-dev.txt installs it, and CI must
    # build the site (a broken link, an anchor that is gone, a page not in the nav).
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1",
                                                       "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "reference/configuration/index.html").is_file()


HISTORY = re.compile(r"\bwaves?\b|\bissue \d+|\bround (?:one|two|three|four|\d)|\.\./shared|"
                     r"(?-i:CONTRACT)|§\d", re.IGNORECASE)


@pytest.mark.parametrize("path", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_a_page_speaks_of_the_product_not_its_history(path: Path):
    found = [m.group(0) for m in HISTORY.finditer(path.read_text())]
    assert found == [], f"{path.relative_to(ROOT)} speaks of {found}"


def test_the_schema_version_shown_is_the_current_one():
    latest = max(int(p.name[:4]) for p in (ROOT / "migrations").glob("*.up.sql"))
    shown = [int(n) for page in PAGES for n in re.findall(
        r"migration (\d+)\)|\"(?:expected|found)\": (\d+)", page.read_text()) for n in n if n]
    assert shown and set(shown) == {latest}


def test_the_readme_is_a_short_guide_that_links_into_the_docs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 300
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert links and [link for link in links if not (ROOT / link).is_file()] == []


def test_the_pages_the_code_points_users_to_exist():
    cited = {m for path in (ROOT / "aiqueue").rglob("*.py")
             for m in re.findall(r"docs/[\w/.-]+\.md", path.read_text())}
    assert cited and sorted(c for c in cited if not (ROOT / c).is_file()) == []


def test_the_files_the_pages_name_exist():
    named = {m for path in [ROOT / "README.md", *PAGES] for m in re.findall(
        r"\b(?:aiqueue|tests|clients|functions|bench|scripts)/[\w./-]+\.(?:py|sql|md|ts|yml)\b",
        path.read_text())}
    assert named and sorted(n for n in named if not (ROOT / n).exists()) == []
