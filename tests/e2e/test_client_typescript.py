"""The TypeScript client kit (clients/typescript) against a running app.

Its generated types must equal what openapi-typescript makes of the served
description; `tsc --noEmit` must pass; its node tests (client, resumable events,
the React hook, the Next.js server action) run against `aiqueue serve`.
Needs node and npm, with clients/typescript/node_modules from `npm ci` (.ci/run
installs it); skipped without them, failed instead under AIQUEUE_REQUIRE_NODE=1 (CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import asyncpg
import pytest

from aiqueue.web.app import create_app
from tests.conftest import add_submissions, make_settings
from tests.e2e.api_server import api_server
from tests.e2e.live_servers import serve
from tests.e2e.servers import ROOT

pytestmark = pytest.mark.e2e
KIT = ROOT / "clients" / "typescript"
BIN = KIT / "node_modules" / ".bin"
SEED = {"ts-client": 3, "ts-drop": 4, "ts-hook": 3, "ts-next": 2, "ts-happy": 2, "ts-gate": 3,
        "ts-export": 2,
        "ts-remark": 3, "ts-ask": 2}


@pytest.fixture(scope="module")
def node() -> str:
    """The node executable, with the kit's npm packages installed."""
    found = shutil.which("node")
    problem = None
    if found is None or shutil.which("npm") is None:
        problem = "node/npm are not installed (apt-get install nodejs npm)"
    elif not (BIN / "tsc").exists() or not (BIN / "openapi-typescript").exists():
        problem = "clients/typescript/node_modules is missing (run `npm ci` there)"
    if problem is not None:
        if os.environ.get("AIQUEUE_REQUIRE_NODE") == "1":
            pytest.fail(f"{problem}, and AIQUEUE_REQUIRE_NODE=1")
        pytest.skip(problem)
    assert found is not None
    return found


def run(args: list[str], *, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=KIT, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout[-8000:]}\n{done.stderr[-4000:]}"
    return done


def test_the_committed_types_are_what_the_served_description_generates(
    node: str, tmp_path: Path
):
    app = create_app(make_settings("").with_overrides(database_url=None))
    with serve(app) as served:
        out = tmp_path / "schema.d.ts"
        run([node, str(BIN / "openapi-typescript"), f"{served.url}/api/marking/openapi.json",
             "-o", str(out)])
    committed = (KIT / "src" / "schema.d.ts").read_text()
    assert out.read_text() == committed, (
        "clients/typescript/src/schema.d.ts is stale: serve the app and run "
        "`npm run generate` in clients/typescript")


def test_the_kit_typechecks(node: str):
    run([node, str(BIN / "tsc"), "--noEmit", "-p", "tsconfig.json"])


async def test_the_node_tests_pass_against_a_running_app(
    node: str, db_url: str, conn: asyncpg.Connection
):
    seeded = {name: [str(i) for i in await add_submissions(conn, n, name, "light water")]
              for name, n in SEED.items()}
    shutil.rmtree(KIT / "build", ignore_errors=True)
    run([node, str(BIN / "tsc"), "-p", "tsconfig.test.json"])
    tests = sorted(str(p.relative_to(KIT)) for p in (KIT / "build" / "test").glob("*.test.js"))
    assert len(tests) >= 6
    with api_server(db_url, stream_seconds=2.0) as app:
        done = run([node, "--test", "--test-concurrency=1", "--test-timeout=60000", *tests], env={
            "AIQUEUE_URL": app.url, "MARKING_QUEUE_SECRET": app.secret,
            "AIQUEUE_SEED": json.dumps(seeded)}, timeout=240)
    assert "# fail 0" in done.stdout and "# pass 0" not in done.stdout, done.stdout[-3000:]
