"""The code's structure holds: every SQL name used exists, every module has a layer."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from aiqueue.db.store import queries
from aiqueue.paths import ROOT

# Calls and subscripts that take the name of a SQL block.
_RUNNERS = {"_fetch", "_fetchrow", "_fetchval", "_execute", "_exec"}


def _named_blocks(path: Path) -> set[str]:
    """String constants the file uses as SQL block names."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _RUNNERS and node.args
                and isinstance(node.args[0], ast.Constant)):
            names.add(node.args[0].value)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            target = node.value
            if (isinstance(target, ast.Attribute) and target.attr == "sql") or (
                    isinstance(target, ast.Call) and getattr(target.func, "id", "") == "queries"):
                names.add(node.slice.value)
    return names


def test_every_sql_block_the_code_names_exists():
    files = [*ROOT.joinpath("aiqueue").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py"),
             *ROOT.joinpath("bench").rglob("*.py")]
    used = {name: path for path in files for name in _named_blocks(path)}
    assert len(used) > 20, "the scan finds the store's queries"
    missing = {name: str(path.relative_to(ROOT)) for name, path in used.items()
               if name not in queries()}
    assert missing == {}


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text())["tool"]["importlinter"]
    contracts: list[dict[str, object]] = config["contracts"]
    return contracts


def _top_level() -> set[str]:
    """aiqueue's modules and packages, one level down."""
    here = ROOT.joinpath("aiqueue")
    modules = {f"aiqueue.{p.stem}" for p in here.glob("*.py") if p.stem != "__init__"}
    return modules | {f"aiqueue.{p.parent.name}" for p in here.glob("*/__init__.py")}


def test_every_module_of_aiqueue_sits_in_a_layer():
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    assert isinstance(layers, list)
    placed = {name.strip() for layer in layers for name in layer.split(":")}
    assert _top_level() - placed == set()


def test_the_driver_and_the_reference_function_each_have_one_importer():
    # Protected contracts: a new module can't slip past them, as it could past a list.
    protected = {tuple(c["protected_modules"]): c["allowed_importers"]  # type: ignore[arg-type]
                 for c in _contracts() if c["type"] == "protected"}
    assert protected == {("asyncpg",): ["aiqueue.db"], ("functions",): ["aiqueue.dev"]}
