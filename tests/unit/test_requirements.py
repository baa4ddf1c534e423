"""pyproject's [project] dependencies and requirements.txt name the same runtime set."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def normalized(lines: list[str]) -> set[str]:
    """One canonical string per requirement: name, sorted extras, specifiers, marker."""
    out = set()
    for line in lines:
        req = Requirement(line)
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        spec = ",".join(sorted(str(s) for s in req.specifier))
        marker = f"; {req.marker}" if req.marker else ""
        out.add(f"{canonicalize_name(req.name)}{extras}{spec}{marker}")
    return out


def requirements_txt() -> list[str]:
    """The requirement lines of requirements.txt (comments and blanks dropped)."""
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    kept = [line.split(" #")[0].strip() for line in lines]
    return [line for line in kept if line and not line.startswith("#")]


def pyproject_dependencies() -> list[str]:
    """[project] dependencies of pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return list(project.get("dependencies", []))


def test_the_two_lists_agree() -> None:
    assert not any(line.startswith("-") for line in requirements_txt()), "no pip options"
    assert normalized(pyproject_dependencies()) == normalized(requirements_txt())


def test_the_list_is_the_runtime_set() -> None:
    names = {n.split("[")[0].split(">")[0].split("<")[0] for n in normalized(requirements_txt())}
    assert {"starlette", "asyncpg", "httpx", "itsdangerous", "jinja2"} <= names


def test_normalization_ignores_order_case_and_spacing() -> None:
    a = normalized(["Jinja2 >=3.1, <4", "uvicorn[standard,foo]>=0.30"])
    b = normalized(["uvicorn[foo,standard] >= 0.30", "jinja2<4,>=3.1"])
    assert a == b
    assert normalized(["httpx>=0.28"]) != normalized(["httpx>=0.27"])
