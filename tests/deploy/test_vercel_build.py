"""`vercel build` with Vercel's own CLI, then the built functions served by the bundled runtime.

Skipped when node/npm or an installed Python 3.12 is missing, unless AIQUEUE_REQUIRE_VERCEL
is set (CI sets it in .ci/run).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.db.migrate import migrate
from aiqueue.vercel.vercel_json import load
from tests import pg
from tests.conftest import CRON, PASSWORD, SECRET, add_submissions
from tests.deploy.edge import Edge
from tests.deploy.vercel_build import (
    FunctionServer,
    build,
    functions,
    materialize,
    python312,
    uv_python312,
)
from tests.e2e.servers import Faults, MarkingFunction, drain, free_port, run_asgi
from tests.roles import as_user, ensure_role

# One worker builds once for every test here (pytest-xdist keeps a group on one worker).
pytestmark = [pytest.mark.vercel, pytest.mark.e2e, pytest.mark.xdist_group("vercel")]
ROOT = Path(__file__).resolve().parents[2]
RUNTIME_DEPS = ("starlette", "asyncpg", "httpx", "itsdangerous", "jinja2", "sniffio")


REQUIRED = bool(os.environ.get("AIQUEUE_REQUIRE_VERCEL"))


def _python() -> str:
    """Python 3.12 for the build and the functions; skip (or fail in CI) without one."""
    python = python312() or (uv_python312() if REQUIRED else None)
    if python is None:
        _unavailable("an installed Python 3.12")
    return str(python)


def _unavailable(what: str) -> None:
    if REQUIRED:
        pytest.fail(f"AIQUEUE_REQUIRE_VERCEL is set but {what} is missing")
    pytest.skip(f"{what} not found: the Vercel build check needs it")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if not (shutil.which("node") and shutil.which("npm")):
        _unavailable("node/npm")
    project = tmp_path_factory.mktemp("vercel-project")
    return project, build(project, _python())


@dataclass
class Deployment:
    db: str
    edge: Edge
    url: str
    servers: dict[str, FunctionServer]
    function: MarkingFunction


@pytest.fixture(scope="module")
def deployment(built: tuple[Path, Path], pg_admin: str,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    project, output = built
    db = pg.run(pg.create_test_db(pg_admin))
    # The functions log in as a runtime role, as a deployment does (README's Deploy).
    role = f"aiqueue_vercel_{os.getpid()}"
    pg.run(_runtime_role(pg_admin, db, role))
    fn = MarkingFunction(Faults(work_seconds=(0.005, 0.02)))
    fn_port, edge_port = free_port(), free_port()
    built_functions = functions(output)
    ports = {entry: free_port() for entry in built_functions}
    edge = Edge(load().rewrites, ports)
    url = f"http://127.0.0.1:{edge_port}"
    # VERCEL_ENV=development: what `vercel dev` (whose runtime serves these) runs as, so a
    # local APP_BASE_URL is allowed (in production it stops start-up).
    env = {"VERCEL": "1", "VERCEL_ENV": "development",
           "DATABASE_URL": as_user(db, role, f"pw-{role}"),
           "MARKING_QUEUE_SECRET": SECRET,
           "CRON_SECRET": CRON, "AI_QUEUE_ADMIN_PASSWORD": PASSWORD, "APP_BASE_URL": url,
           "AI_MARKING_FUNCTION_URL": f"http://127.0.0.1:{fn_port}/mark",
           "QUEUE_MAX_IN_FLIGHT": "2", "QUEUE_RETRY_BASE_SECONDS": "0"}
    work = tmp_path_factory.mktemp("functions")
    servers = {
        entry: FunctionServer(_python(), materialize(func, project, work / entry),
                              entry, ports[entry], env, work / f"{entry.replace('/', '_')}.log")
        for entry, func in built_functions.items()
    }
    with run_asgi(fn.app, fn_port), run_asgi(edge, edge_port):
        for server in servers.values():
            server.start()
        try:
            for server in servers.values():
                server.wait_listening()
            yield Deployment(db, edge, url, servers, fn)
        finally:
            for server in servers.values():
                server.stop()
            pg.run(pg.drop_test_db(pg_admin, db))
            pg.run(_drop_role(pg_admin, role))


async def _runtime_role(admin_dsn: str, db: str, role: str) -> None:
    admin = await asyncpg.connect(admin_dsn)
    try:
        await ensure_role(admin, role, f"LOGIN PASSWORD 'pw-{role}'")
    finally:
        await admin.close()
    await migrate(db, "up", runtime_role=role)


async def _drop_role(admin_dsn: str, role: str) -> None:
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'DROP ROLE IF EXISTS "{role}"')
    finally:
        await admin.close()


def test_each_function_ships_the_runtime_dependencies_and_not_the_tests(built):
    project, output = built
    entries = {str(p.relative_to(ROOT)) for p in (ROOT / "api").rglob("*.py")}
    config = load()
    assert set(functions(output)) == entries
    for entry, func in functions(output).items():
        vc = json.loads((func / ".vc-config.json").read_text())
        files = set(vc["filePathMap"])
        tops = {name.split("/")[1] for name in files if name.startswith("_vendor/")}
        assert set(RUNTIME_DEPS) <= tops, (entry, sorted(tops))
        assert {"vercel.json", "templates/ai_queue.html", "aiqueue/db/sql/queue.sql",
                "aiqueue/db/sql/functions/70_settle.sql"} <= files
        # The schema check (503 schema_behind) reads the newest migration's number.
        assert {f"migrations/{p.name}" for p in (ROOT / "migrations").glob("*.sql")} <= files
        assert not {n for n in files if n.split("/")[0] in ("tests", "bench", "functions")}
        assert vc["runtime"] == "python3.12"
        assert vc["maxDuration"] == config.max_duration(entry)
    # Static assets come from public/ only: the source tree is not published.
    static = {str(p.relative_to(output / "static")) for p in (output / "static").rglob("*")
              if p.is_file()}
    assert static == {str(p.relative_to(ROOT / "public")) for p in (ROOT / "public").rglob("*")}


@pytest.mark.parametrize("mode", ["destination", "public"])
async def test_a_chain_runs_through_the_built_functions(deployment: Deployment, mode: str):
    deployment.edge.mode = mode
    deployment.edge.seen.clear()
    conn = await asyncpg.connect(deployment.db)
    try:
        ids = await add_submissions(conn, 6, f"hw-{mode}")
        auth = {"authorization": f"Bearer {SECRET}"}
        async with httpx.AsyncClient(base_url=deployment.url, timeout=60) as client:
            r = await client.post("/api/marking/enqueue", headers=auth, json={
                "assignment_id": f"hw-{mode}", "submission_ids": [str(i) for i in ids]})
            assert r.status_code == 202, r.text
            assert r.json()["enqueued"] == 6
            await drain(conn, timeout=120)
            status = await client.get(f"/api/marking/submissions/{ids[0]}/status", headers=auth)
            progress = await client.get(f"/api/marking/assignments/hw-{mode}/progress",
                                        headers=auth)
            health = await client.get("/healthz", headers=auth)
            metrics = await client.get("/metrics", headers=auth)
        rows = await conn.fetch("SELECT status FROM ai_marking_queue WHERE assignment_id = $1",
                                f"hw-{mode}")
        marked = await conn.fetchval(
            "SELECT count(*) FROM submissions WHERE assignment_id = $1 AND ai_result IS NOT NULL",
            f"hw-{mode}")
    finally:
        await conn.close()
    assert [r["status"] for r in rows] == ["completed"] * 6 and marked == 6
    assert status.status_code == 200 and status.json()["status"] == "completed"
    assert progress.status_code == 200 and progress.json()["completed"] == 6
    assert health.status_code == 200 and metrics.status_code == 200
    assert deployment.function.record.max_in_flight <= 2
    seen = deployment.edge.seen
    hit = {entry for entry, _ in seen}
    # The chain went enqueue → process-queue → function → webhook, each a built function.
    assert {"api/enqueue.py", "api/process_queue.py", "api/webhooks/ai_mark.py"} <= hit
    marking = [target for entry, target in seen if entry == "api/marking.py"]
    prefix = "/api/marking?path=" if mode == "destination" else "/api/marking/"
    assert marking and all(t.startswith(prefix) for t in marking), marking


@pytest.mark.parametrize("mode", ["destination", "public"])
async def test_the_cron_get_with_cron_secret(deployment: Deployment, mode: str):
    deployment.edge.mode = mode
    async with httpx.AsyncClient(base_url=deployment.url, timeout=60) as client:
        cron = await client.get("/api/marking/process-queue",
                                headers={"authorization": f"Bearer {CRON}"})
        wrong = await client.get("/api/marking/process-queue",
                                 headers={"authorization": "Bearer not-the-cron-secret-0000"})
    assert cron.status_code == 200, cron.text
    assert {"claimed", "dispatched", "recovered", "pruned", "chained"} <= set(cron.json())
    assert wrong.status_code == 401 and wrong.json()["error"]


@pytest.mark.parametrize("mode", ["destination", "public"])
async def test_the_operator_logs_in(deployment: Deployment, mode: str):
    deployment.edge.mode = mode
    async with httpx.AsyncClient(base_url=deployment.url, timeout=60) as client:
        anonymous = await client.get("/ai-queue")
        form = await client.get("/ai-queue/login")
        bad = await client.post("/ai-queue/login", data={"password": "wrong"})
        good = await client.post("/ai-queue/login", data={"password": PASSWORD})
        cookie = good.headers.get("set-cookie", "").split(";")[0]
        page = await client.get("/ai-queue", headers={"cookie": cookie})
    assert anonymous.status_code == 303
    assert anonymous.headers["location"].startswith("/ai-queue/login")
    assert form.status_code == 200 and 'name="password"' in form.text
    assert bad.status_code == 401
    assert good.status_code == 303 and good.headers["location"] == "/ai-queue" and cookie
    assert page.status_code == 200 and "csrf_token" in page.text


@pytest.mark.parametrize("mode", ["destination", "public"])
async def test_the_doctor_through_the_built_functions(deployment: Deployment, mode: str):
    deployment.edge.mode = mode
    deployment.edge.seen.clear()
    async with httpx.AsyncClient(base_url=deployment.url, timeout=60) as client:
        anonymous = await client.get("/api/marking/doctor")
        r = await client.get("/api/marking/doctor",
                             headers={"authorization": f"Bearer {SECRET}"})
    assert anonymous.status_code == 401
    assert r.status_code == 200, r.text
    checks = {c["name"]: c for c in r.json()["checks"]}
    assert r.json()["ok"] is True, checks
    assert checks["schema"]["detail"].startswith("current")
    assert checks["probe"]["status"] == "pass" and "called back" in checks["probe"]["detail"]
    assert checks["vercel"]["status"] == "pass" and "vercel dev" in checks["vercel"]["detail"]
    assert (checks["role"]["status"], checks["lockdown"]["status"]) == ("pass", "pass")
    hit = {entry for entry, _ in deployment.edge.seen}
    # The report came from the marking function; the probe's callback went to the webhook's.
    assert {"api/marking.py", "api/webhooks/ai_mark.py"} <= hit


def test_the_functions_load_only_their_bundle(deployment: Deployment):
    python = Path(_python()).resolve()
    prefix = python.parent.parent
    for entry, server in deployment.servers.items():
        pids = server.pids()
        assert len(pids) >= 2, entry  # vercel dev's reloader and the app
        loaded = set()
        for pid in pids:
            assert Path(f"/proc/{pid}/exe").resolve() == python
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
                if ".so" in path and path.startswith("/"):
                    loaded.add(path)
        python_ext = {p for p in loaded if ".cpython-" in p or ".abi3." in p}
        outside = {p for p in python_ext
                   if not p.startswith((str(server.func_dir), str(prefix)))}
        assert not outside, (entry, sorted(outside))
        # The database driver (a C extension) was loaded from the function's own files.
        assert any(str(server.func_dir / "_vendor/asyncpg") in p for p in python_ext), entry


def test_a_bundle_missing_a_dependency_does_not_start(built, tmp_path: Path):
    project, output = built
    func = materialize(functions(output)["api/enqueue.py"], project, tmp_path / "fn")
    for path in (func / "_vendor").glob("starlette*"):
        shutil.rmtree(path)
    server = FunctionServer(_python(), func, "api/enqueue.py", free_port(),
                            {"DATABASE_URL": "postgresql://u@127.0.0.1:1/x"},
                            tmp_path / "fn.log")
    server.start()
    try:
        assert server.proc is not None
        assert server.proc.wait(60) != 0
    finally:
        server.stop()
    assert "No module named 'starlette'" in server.output()


def misconfigured(built: Any, tmp_path: Path, entry: str, env: dict[str, str]
                  ) -> tuple[dict[str, Any], list[str]]:
    """Serve one built function with a bad setting and POST to it: its 503 and its log lines.

    The function must answer `misconfigured` (never a traceback) and log why.
    """
    project, output = built
    func = materialize(functions(output)[entry], project, tmp_path / "fn")
    path = "/" + entry.removesuffix(".py")
    server = FunctionServer(_python(), func, entry, free_port(), {
        "VERCEL": "1", "DATABASE_URL": "postgresql://u@127.0.0.1:1/x",
        "MARKING_QUEUE_SECRET": SECRET, "AI_MARKING_FUNCTION_URL": "https://fn.test/mark",
        **env}, tmp_path / "fn.log")
    server.start()
    try:
        server.wait_listening()
        answer = httpx.post(f"http://127.0.0.1:{server.port}{path}",
                            headers={"authorization": f"Bearer {SECRET}"}, timeout=30)
    finally:
        server.stop()
    assert answer.status_code == 503 and answer.json()["error"] == "misconfigured"
    lines = [line for line in server.output().splitlines() if line.startswith("aiqueue: ")]
    return answer.json(), lines


def test_a_sync_timeout_beyond_max_duration_stops_the_function(built, tmp_path: Path):
    body, lines = misconfigured(built, tmp_path, "api/process_queue.py", {
        "VERCEL_PROJECT_PRODUCTION_URL": "marking.vercel.app",
        "AI_MARKING_FUNCTION_MODE": "sync", "QUEUE_DISPATCH_TIMEOUT_SECONDS": "150"})
    assert body["detail"].startswith("QUEUE_DISPATCH_TIMEOUT_SECONDS=150 does not fit")
    assert lines and all("QUEUE_DISPATCH_TIMEOUT_SECONDS=150" in line for line in lines)


def test_a_local_app_base_url_stops_the_function_on_vercel(built, tmp_path: Path):
    # No APP_BASE_URL and no VERCEL_PROJECT_PRODUCTION_URL: it would be 127.0.0.1.
    body, lines = misconfigured(built, tmp_path, "api/enqueue.py", {})
    assert body["detail"].startswith("APP_BASE_URL is a local address")
    assert lines and all("APP_BASE_URL" in line for line in lines)
