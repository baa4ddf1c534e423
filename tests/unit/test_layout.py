"""The code's structure holds: every SQL name used exists, every module has a layer."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from aiqueue.db.store import queries
from aiqueue.paths import ROOT

# Calls and subscripts that take the name of a SQL block: these, and every
# gateway writer (`_write`, `_write_val`, `_write_one`, a query class's own `_write_*`).
_RUNNERS = {"_fetch", "_fetchrow", "_fetchval", "_execute", "_exec"}


def _runs_sql(name: str) -> bool:
    return name in _RUNNERS or name.startswith("_write")


def _named_blocks(path: Path) -> set[str]:
    """String constants the file uses as SQL block names."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and _runs_sql(node.func.attr) and node.args
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
    assert {"claim", "recover_stuck", "review_accept", "probe_answer_record"} <= set(used), (
        "the scan finds the names the writers run")
    missing = {name: str(path.relative_to(ROOT)) for name, path in used.items()
               if name not in queries()}
    assert missing == {}


# The query modules whose .sql file has another name (the rest: db/x.py runs sql/x.sql).
_SQL_FILE_OF = {"queue": "queries", "rows": "queries", "outbox": "notify", "timing": "time"}
# Statements one query class runs inside another file's transaction, and why.
_SHARED = {
    "idempotency_claim", "idempotency_answer", "idempotency_save",  # enqueue's and erasure's keys
    "batch_lane_rows",  # an enqueue puts its rows on the overnight lane in its own transaction
    "serial_plans",  # the stats' SET LOCAL, shared with the monitoring page
    "recover_stuck",  # recovery's sweep, beside the claim it frees slots for
}


def _blocks_by_file() -> dict[str, set[str]]:
    sql = ROOT.joinpath("aiqueue", "db", "sql")
    return {f.stem: set(re.findall(r"^-- ([a-z_]+) --$", f.read_text(), re.MULTILINE))
            for f in sql.glob("*.sql")}


def _query_modules() -> list[Path]:
    """aiqueue/db's modules that hold a query class (a Gateway)."""
    def holds_one(path: Path) -> bool:
        return any(isinstance(node, ast.ClassDef) and any(
            getattr(base, "id", "") == "Gateway" for base in node.bases)
            for node in ast.walk(ast.parse(path.read_text())))
    return [p for p in ROOT.joinpath("aiqueue", "db").glob("*.py") if holds_one(p)]


def test_each_query_class_runs_the_statements_of_its_own_sql_file():
    # A newcomer finds a statement's method on its file's class (aiqueue/db/store.py).
    blocks = _blocks_by_file()
    modules = _query_modules()
    assert len(modules) >= 12, "the scan finds the query classes"
    strays = {}
    for path in modules:
        names = _named_blocks(path) - _SHARED
        own = blocks.get(_SQL_FILE_OF.get(path.stem, path.stem), set())
        if names - own:
            strays[path.name] = sorted(names - own)
    assert strays == {}
    assert _SHARED <= set().union(*blocks.values())


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
    # ":" joins siblings that may import each other, "|" siblings that may not.
    placed = {name.strip() for layer in layers for name in re.split(r"[:|]", layer)}
    assert _top_level() - placed == set()


def test_the_driver_and_the_reference_function_each_have_one_importer():
    # Protected contracts: a new module can't slip past them, as it could past a list.
    protected = {tuple(c["protected_modules"]): c["allowed_importers"]  # type: ignore[arg-type]
                 for c in _contracts() if c["type"] == "protected"}
    assert protected == {("asyncpg",): ["aiqueue.db"], ("functions",): ["aiqueue.dev"]}


def test_the_web_never_imports_the_database_package():
    forbidden = [(c["source_modules"], c["forbidden_modules"])
                 for c in _contracts() if c["type"] == "forbidden"]
    assert (["aiqueue.web"], ["aiqueue.db"]) in forbidden
