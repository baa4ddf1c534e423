"""Schemathesis against a running app: no 5xx, nothing the description does not say.

Every operation of the served description, with the bearer, on a migrated
database with seeded (and partly marked) submissions; a few examples per
operation keep the run within a couple of minutes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.conftest import add_submissions
from tests.e2e.api_server import api_server
from tests.e2e.servers import ROOT, drain
from tests.unit.openapi_kit import PENDING

pytestmark = pytest.mark.e2e
# positive_data_acceptance is left out: some rules are the data's, not the schema's
# (unknown submission ids, a usage range over 366 days, NUL characters in a result).
CHECKS = ",".join((
    "not_a_server_error", "status_code_conformance", "content_type_conformance",
    "response_schema_conformance", "response_headers_conformance", "negative_data_rejection",
    "unsupported_method", "missing_required_header", "ignored_auth"))


async def seed(url: str, secret: str, conn: asyncpg.Connection) -> str:
    """Submissions, some marked by the reference function; a config that uses their ids."""
    marked = await add_submissions(conn, 4, "hw-st", "light water carbon dioxide")
    waiting = await add_submissions(conn, 4, "hw-waiting")
    async with httpx.AsyncClient(base_url=url,
                                 headers={"authorization": f"Bearer {secret}"}) as client:
        r = await client.post("/api/marking/enqueue", json={
            "assignment_id": "hw-st", "submission_ids": [str(i) for i in marked]})
        assert r.status_code == 202, r.text
    await drain(conn, 60)
    rows = await conn.fetch("SELECT queue_id FROM ai_marking_queue")
    return config_toml(queue_ids=[str(r["queue_id"]) for r in rows],
                       submission_ids=[str(i) for i in [*marked, *waiting]],
                       assignments=["hw-st", "hw-waiting"])


def config_toml(**dictionaries: list[str]) -> str:
    """Real ids half of the time, so operations reach past their 404s and 422s."""
    lines = []
    for name, values in dictionaries.items():
        lines += [f"[dictionaries.{name}]", f"values = {json.dumps(values)}", ""]
    lines.append("[parameters]")
    for key, name in (("path.queue_id", "queue_ids"), ("path.submission_id", "submission_ids"),
                      ("path.assignment_id", "assignments"), ("query.assignment_id", "assignments"),
                      ("body.assignment_id", "assignments"),
                      ("body.submission_ids[*]", "submission_ids")):
        lines.append(f'"{key}" = {{ dictionary = "{name}", probability = 0.5 }}')
    return "\n".join(lines) + "\n"


async def test_schemathesis_finds_nothing(db_url: str, conn: asyncpg.Connection,
                                          tmp_path: Path):
    with api_server(db_url, stream_seconds=0.3) as app:
        config = tmp_path / "schemathesis.toml"
        config.write_text(await seed(app.url, app.secret, conn))
        excluded = [arg for path, _ in sorted(PENDING) for arg in ("--exclude-path", path)]
        run = subprocess.run(
            [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
             f"{app.url}/api/marking/openapi.json", "--checks", CHECKS,
             "-H", f"Authorization: Bearer {app.secret}", "--max-examples", "15",
             "--workers", "1", "--seed", "7", "--request-timeout", "10", "--no-color",
             "--phases", "examples,coverage,fuzzing,stateful", *excluded],
            cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
        log = app.app.output()
    assert run.returncode == 0, f"{run.stdout[-12000:]}\n{run.stderr[-3000:]}\n{log[-3000:]}"
    assert '"event": "error"' not in log, log[-3000:]
