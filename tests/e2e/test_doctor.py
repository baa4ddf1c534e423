"""`python -m aiqueue doctor` against real parts: `aiqueue serve`, the reference function's server,
and each native target through its emulator.  Each check passes on a good setup and names the
mistake on a broken one (docs/operating/doctor.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from functions.ai_mark.server import create_app as function_app
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.conftest import SECRET
from tests.e2e.doctor_cli import by_name, doctor
from tests.e2e.servers import AppProcess, free_port, run_asgi
from tests.roles import RuntimeDb

pytestmark = pytest.mark.e2e
TOKEN = "function-token-0123456789"


def line(text: str, name: str) -> str:
    return next(x for x in text.splitlines() if x[6:].startswith(name + " "))


@pytest.fixture
def function_url() -> Iterator[str]:
    """The reference function's own server, simulator backend, with a bearer token."""
    port = free_port()
    settings = FunctionSettings(simulate_latency=0, callback_backoff=0, function_token=TOKEN)
    with run_asgi(function_app(settings), port):
        yield f"http://127.0.0.1:{port}/mark"


def http_env(db_url: str, function_url: str, **extra: str) -> dict[str, str]:
    return {"DATABASE_URL": db_url, "MARKING_QUEUE_SECRET": SECRET,
            "AI_MARKING_FUNCTION_URL": function_url, "AI_MARKING_FUNCTION_TOKEN": TOKEN,
            "QUEUE_TICK_SECONDS": "0", **extra}


async def snapshot(conn: asyncpg.Connection) -> tuple[Any, ...]:
    return (await conn.fetch("SELECT * FROM ai_marking_queue"),
            await conn.fetch("SELECT id, ai_result FROM submissions WHERE ai_result IS NOT NULL"))


async def test_a_good_setup_passes_every_check(runtime_db: RuntimeDb, function_url: str):
    conn = await asyncpg.connect(runtime_db.owner_dsn)
    env = http_env(runtime_db.runtime_dsn, function_url)
    app = AppProcess(env, free_port())
    app.start()
    try:
        before = await snapshot(conn)
        code, report, text = await asyncio.to_thread(doctor, {**env, "APP_BASE_URL": app.url})
        async with httpx.AsyncClient(base_url=app.url, timeout=60) as client:
            served = await client.get("/api/marking/doctor",
                                      headers={"authorization": f"Bearer {SECRET}"})
            anonymous = await client.get("/api/marking/doctor")
        after = await snapshot(conn)
    finally:
        app.stop()
        await conn.close()
    assert code == 0, text
    checks = by_name(report)
    assert {n: c["status"] for n, c in checks.items()} == {
        "settings": "pass", "database": "pass", "schema": "pass", "pooler": "pass",
        "listen": "pass", "lockdown": "pass", "submissions": "pass", "role": "pass",
        "function": "pass", "probe": "pass", "vercel": "skip", "cron": "skip",
        # No pool declares a batch API; no prefix was sent to the model yet.
        "batch": "skip", "prompt_cache": "pass",
        # Next month's partitions made at the upgrade; a new record has few updates.
        "partitions": "pass", "record": "pass"}
    assert "called back through" in checks["probe"]["detail"]
    assert "ai_mark" in checks["probe"]["detail"]
    assert line(text, "probe").startswith("PASS") and text.rstrip().endswith("all checks passed")
    assert served.status_code == 200 and served.json()["ok"] is True
    assert anonymous.status_code == 401
    assert after == before  # a probe touches no row and no submission


async def test_a_newcomers_wrong_function_token_is_named(db_url: str, function_url: str):
    env = http_env(db_url, function_url, AI_MARKING_FUNCTION_TOKEN="the-token-from-the-docs")
    app = AppProcess(env, free_port())
    app.start()
    try:
        code, report, text = await asyncio.to_thread(doctor, {**env, "APP_BASE_URL": app.url})
    finally:
        app.stop()
    assert code == 1
    function = by_name(report)["function"]
    assert function["status"] == "fail"
    assert "refused AI_MARKING_FUNCTION_TOKEN (HTTP 401)" in function["detail"]
    assert "AI_MARKING_FUNCTION_TOKEN" in function["fix"]
    assert by_name(report)["probe"]["status"] == "skip"
    assert line(text, "function").startswith("FAIL")
    assert "fix: set AI_MARKING_FUNCTION_TOKEN" in text
    assert text.rstrip().endswith("some checks failed")


async def test_a_function_that_cannot_reach_the_app(db_url: str, function_url: str):
    env = http_env(db_url, function_url)
    app = AppProcess(env, free_port())
    app.start()
    try:
        # The doctor's APP_BASE_URL is wrong: the function calls back into nothing.
        dead = f"http://127.0.0.1:{free_port()}"
        code, report, _ = await asyncio.to_thread(doctor, {**env, "APP_BASE_URL": dead}, 3)
    finally:
        app.stop()
    probe = by_name(report)["probe"]
    assert code == 1 and by_name(report)["function"]["status"] == "pass"
    assert probe["status"] == "fail" and f"no callback reached {dead}/webhooks/ai-mark" in \
        probe["detail"] and "APP_BASE_URL" in probe["fix"]


class OldFunction:
    """A function from before probes: it takes any dispatch as a job, which has no submission,
    so it calls back `failed` / invalid_input, as the reference function used to."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()
        self.app = Starlette(routes=[Route("/mark", self.mark, methods=["POST"])])

    async def mark(self, request: Request) -> Response:
        job = await request.json()
        task = asyncio.create_task(self.call_back(job))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return JSONResponse({"accepted": True}, status_code=202)

    async def call_back(self, job: dict[str, Any]) -> None:
        async with httpx.AsyncClient() as client:
            await client.post(job["callback_url"], json=[{
                "queue_id": job["queue_id"], "token": job["callback_token"],
                "status": "failed", "error": "invalid_input", "retryable": False}])


async def test_a_function_too_old_to_know_probes_fails_the_check(
    db_url: str, conn: asyncpg.Connection
):
    port = free_port()
    env = http_env(db_url, f"http://127.0.0.1:{port}/mark")
    app = AppProcess(env, free_port())
    with run_asgi(OldFunction().app, port):
        app.start()
        try:
            before = await snapshot(conn)
            code, report, _ = await asyncio.to_thread(doctor, {**env, "APP_BASE_URL": app.url})
            after = await snapshot(conn)
        finally:
            app.stop()
    probe = by_name(report)["probe"]
    assert code == 1 and probe["status"] == "fail"
    assert "too old to know probes" in probe["detail"] and "failed" in probe["detail"]
    assert "functions/ai_mark" in probe["fix"]
    assert after == before


async def test_broken_settings_and_an_unreachable_database_are_named(db_url: str):
    code, report, text = await asyncio.to_thread(doctor, {
        "DATABASE_URL": db_url, "MARKING_QUEUE_SECRET": "short"})
    assert code == 1 and [c["name"] for c in report["checks"]] == ["settings"]
    assert "MARKING_QUEUE_SECRET" in report["checks"][0]["detail"]
    assert line(text, "settings").startswith("FAIL")
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere"
    code, report, _ = await asyncio.to_thread(doctor, {
        "DATABASE_URL": dead, "MARKING_QUEUE_SECRET": SECRET})
    checks = by_name(report)
    assert code == 1 and checks["database"]["status"] == "fail"
    assert "DATABASE_URL" in checks["database"]["detail"]
    assert {checks[n]["status"] for n in ("schema", "pooler", "function")} == {"skip"}
