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
            names.add(str(node.args[0].value))
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            target = node.value
            if (isinstance(target, ast.Attribute) and target.attr == "sql") or (
                    isinstance(target, ast.Call) and getattr(target.func, "id", "") == "queries"):
                names.add(str(node.slice.value))
    return names


def test_every_sql_block_the_code_names_exists():
    files = [*ROOT.joinpath("aiqueue").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py"),
             *ROOT.joinpath("bench").rglob("*.py")]
    used = {name: path for path in files for name in _named_blocks(path)}
    assert len(used) > 20, "the scan finds the store's queries"
    assert {"claim", "recover_stuck", "accept", "record_probe_answer"} <= set(used), (
        "the scan finds the names the writers run")
    missing = {name: str(path.relative_to(ROOT)) for name, path in used.items()
               if name not in queries()}
    assert missing == {}


# Statements one query class runs inside another file's transaction, and why.
_SHARED = {
    "idempotency_claim", "idempotency_answer", "idempotency_save",  # enqueue's and erasure's keys
    "batch_lane_rows",  # an enqueue puts its rows on the overnight lane in its own transaction
    "serial_plans",  # the stats' SET LOCAL, shared with the monitoring page
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
        own = blocks.get(path.stem, set())
        if names - own:
            strays[path.name] = sorted(names - own)
    assert strays == {}
    assert _SHARED <= set().union(*blocks.values())


# Methods that run a statement of another name, and why.
_OTHER_NAME = {
    "cancel_row": "cancel_pending",  # one statement cancels a row, or an assignment's rest
    "cancel_assignment": "cancel_pending",
    "submission_result": "submission_results",  # the list's statement, for one submission
}


def _blocks_run_by_method(path: Path) -> dict[str, set[str]]:
    """Each public method of the file's query classes, and the named statements it runs."""
    known = queries()
    found: dict[str, set[str]] = {}
    for cls in ast.parse(path.read_text()).body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for fn in cls.body:
            if isinstance(fn, ast.AsyncFunctionDef | ast.FunctionDef) and \
                    not fn.name.startswith("_"):
                found[fn.name] = {
                    node.value for node in ast.walk(fn)
                    if isinstance(node, ast.Constant) and node.value in known}
    return found


def _misnamed(paths: list[Path]) -> dict[str, list[str]]:
    """Methods that run named statements, none of them of the method's own name."""
    wrong = {}
    for path in paths:
        for method, runs in _blocks_run_by_method(path).items():
            if runs and _OTHER_NAME.get(method, method) not in runs:
                wrong[method] = sorted(runs)
    return wrong


def test_each_query_method_runs_the_statement_of_its_own_name():
    # A newcomer who reads a method's name finds its statement by the same name.
    modules = _query_modules()
    assert len({m for p in modules for m in _blocks_run_by_method(p)}) > 90
    assert _misnamed(modules) == {}


def test_the_method_name_check_sees_a_stray(tmp_path: Path):
    stray = tmp_path / "stray.py"
    stray.write_text("class Q(Gateway):\n    async def ping_twice(self) -> bool:\n"
                     "        return bool(await self._fetchval('ping'))\n")
    assert _misnamed([stray]) == {"ping_twice": ["ping"]}


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
    protected: dict[tuple[str, ...], object] = {
        tuple(c["protected_modules"]): c["allowed_importers"]  # type: ignore[arg-type]
        for c in _contracts() if c["type"] == "protected"}
    assert protected == {("asyncpg",): ["aiqueue.db"], ("functions",): ["aiqueue.dev"]}


def test_the_web_never_imports_the_database_package():
    forbidden = [(c["source_modules"], c["forbidden_modules"])
                 for c in _contracts() if c["type"] == "forbidden"]
    assert (["aiqueue.web"], ["aiqueue.db"]) in forbidden


def _imported_modules(source: str, package: str) -> set[str]:
    """Every module a file imports, anywhere in it; relative imports resolved from `package`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = ".".join(parts[:len(parts) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.add(module)
            # `from package import test_x` imports the module test_x.
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def _test_modules_imported(path: Path) -> set[str]:
    package = ".".join(path.relative_to(ROOT).parent.parts)
    return {name for name in _imported_modules(path.read_text(), package)
            if name.startswith("tests.") and name.rsplit(".", 1)[1].startswith("test_")}


def test_the_import_rule_sees_absolute_relative_and_nested_imports():
    source = ("from tests.e2e.test_chaos import AUDIT_SQL\nfrom .test_do_main import web_event\n"
              "from . import test_modes\ndef f():\n    import tests.unit.test_flow\n"
              "from tests.e2e.servers import free_port\nfrom .conftest import TOKEN\n")
    imported = {m for m in _imported_modules(source, "tests.functions")
                if m.rsplit(".", 1)[1].startswith("test_")}
    assert imported == {"tests.e2e.test_chaos", "tests.functions.test_do_main",
                        "tests.functions.test_modes", "tests.unit.test_flow"}


def test_no_test_module_imports_another():
    # What tests share lives in kit modules (fakes.py, *_kit.py, servers.py...):
    # importing a test module runs its tests' module code twice and ties the two files.
    offenders = {str(path.relative_to(ROOT)): sorted(found)
                 for path in sorted(ROOT.joinpath("tests").rglob("*.py"))
                 if (found := _test_modules_imported(path))}
    assert offenders == {}


def _fixtures_named(name: str, path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            marks = [ast.unparse(d) for d in node.decorator_list]
            if any("fixture" in m and (node.name == name or f"name='{name}'" in m)
                   for m in marks):
                return True
    return False


def test_the_store_fixture_is_defined_once():
    where = [str(path.relative_to(ROOT)) for path in sorted(ROOT.joinpath("tests").rglob("*.py"))
             if _fixtures_named("store", path)]
    assert where == ["tests/integration/conftest.py"], (
        "use the integration conftest's store; a module that races more callers than its pool "
        "of 10 says so with pytestmark = pytest.mark.store_pool(n)")
