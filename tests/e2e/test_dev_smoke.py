"""`python -m aiqueue dev` as a person runs it: URLs printed, health, Ctrl-C, resume."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from aiqueue.dev import demo
from tests.conftest import SECRET
from tests.e2e.servers import ROOT, free_port

pytestmark = pytest.mark.e2e
AUTH = {"authorization": f"Bearer {SECRET}"}


class Dev:
    """One run of the dev command in a child process, its output in a file."""

    def __init__(self, db_url: str, log: Path, latency: str) -> None:
        self.port, self.function_port = free_port(), free_port()
        self.log = log
        env = {**os.environ, "DATABASE_URL": db_url, "MARKING_QUEUE_SECRET": SECRET,
               "AI_MARK_SIMULATE_LATENCY": latency}
        for name in ("APP_BASE_URL", "AI_MARKING_FUNCTION_URL", "AI_QUEUE_ADMIN_PASSWORD"):
            env.pop(name, None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aiqueue", "dev", "--port", str(self.port),
             "--function-port", str(self.function_port)],
            cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while text not in self.output():
            if self.proc.poll() is not None:
                raise AssertionError(f"dev exited ({self.proc.returncode}):\n{self.output()}")
            if time.time() > deadline:
                raise AssertionError(f"no {text!r} in:\n{self.output()}")
            time.sleep(0.1)

    def interrupt(self, timeout: float = 45) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"dev did not stop on Ctrl-C:\n{self.output()}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def artifact(name: str) -> Path:
    path = ROOT / "test-artifacts" / name
    path.parent.mkdir(exist_ok=True)
    return path


async def test_dev_prints_its_urls_serves_and_stops_on_ctrl_c(
    db_url: str, conn: asyncpg.Connection
):
    dev = Dev(db_url, artifact("dev-smoke.log"), latency="0.05")
    try:
        dev.wait_for("Teacher page:")
        out = dev.output()
        assert f"{dev.url}/results/assignments/{demo.ASSIGNMENT_ID}" in out
        assert f"{dev.url}/ai-queue" in out
        assert f"Sign in with:     {SECRET}" in out
        assert f"http://127.0.0.1:{dev.function_port}/" in out
        async with httpx.AsyncClient(timeout=10) as client:
            health = await client.get(f"{dev.url}/healthz", headers=AUTH)
            assert health.status_code == 200 and health.json()["database"] is True
            fn = await client.get(f"http://127.0.0.1:{dev.function_port}/healthz")
            assert fn.json()["backend"] == "simulate"
        assert await conn.fetchval("SELECT count(*) FROM submissions WHERE assignment_id = $1",
                                   demo.ASSIGNMENT_ID) == len(demo.ANSWERS)
        assert dev.interrupt() == 0
        assert "stopped" in dev.output() and "Traceback" not in dev.output()
    finally:
        dev.kill()


async def test_ctrl_c_in_the_middle_loses_nothing_and_the_next_run_finishes(
    db_url: str, conn: asyncpg.Connection
):
    ids = [str(demo.submission_id(i)) for i in range(len(demo.ANSWERS))]
    dev = Dev(db_url, artifact("dev-resume-1.log"), latency="0.25")
    try:
        dev.wait_for("Teacher page:")
        async with httpx.AsyncClient(base_url=dev.url, headers=AUTH, timeout=10) as client:
            r = await client.post("/api/marking/enqueue", json={
                "assignment_id": demo.ASSIGNMENT_ID, "submission_ids": ids,
                "payload": demo.payload()})
            assert r.status_code == 202 and r.json()["enqueued"] == len(ids)
        await until(conn, "SELECT count(*) >= 3 FROM ai_marking_queue WHERE status = 'completed'")
        assert dev.interrupt() == 0
    finally:
        dev.kill()
    counts = dict(await conn.fetch("SELECT status, count(*) FROM ai_marking_queue GROUP BY 1"))
    assert "processing" not in counts, counts  # what was being marked was finished
    assert counts.get("pending", 0) > 0 and counts["completed"] >= 3
    assert set(counts) <= {"pending", "completed"}
    again = Dev(db_url, artifact("dev-resume-2.log"), latency="0.02")
    try:
        again.wait_for("Teacher page:")
        await until(conn, "SELECT count(*) = 0 FROM ai_marking_queue "
                          "WHERE status IN ('pending', 'processing')")
        assert again.interrupt() == 0
    finally:
        again.kill()
    rows = await conn.fetch("SELECT status, attempts FROM ai_marking_queue")
    assert len(rows) == len(ids)
    assert {(r["status"], r["attempts"]) for r in rows} == {("completed", 1)}
    assert await conn.fetchval("SELECT count(*) FROM submissions WHERE ai_result IS NOT NULL "
                               "AND assignment_id = $1", demo.ASSIGNMENT_ID) == len(ids)


async def until(conn: asyncpg.Connection, sql: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not await conn.fetchval(sql):
        assert time.time() < deadline, f"timed out waiting for: {sql}"
        await asyncio.sleep(0.1)
