"""End to end per native target: `aiqueue serve` → emulated platform → reference function → webhook.

DigitalOcean: an OpenWhisk-shaped API that checks Basic auth and blocking=false.
Lambda: moto in server mode with IAM authentication on (SigV4 and policy checked).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import SECRET, add_submissions
from tests.e2e.emulators import ACCOUNT, REGION, DoFunctions, LambdaProxy, MotoLambda
from tests.e2e.servers import AppProcess, drain, free_port, run_asgi

pytestmark = pytest.mark.e2e

NAMESPACE = "fn-0d1e6ab4-43a2-4a4e-9c1b-1f0ee4c5e8a2"
DO_KEY = "0d1e6ab4-43a2-4a4e-9c1b-1f0ee4c5e8a2:do-secret-key"
ROWS = 12


@pytest.fixture(autouse=True)
def reference_function_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference function runs in this process: the simulator, answering at once."""
    monkeypatch.setenv("AI_MARK_BACKEND", "simulate")
    monkeypatch.setenv("AI_MARK_SIMULATE_LATENCY", "0")
    # The action never runs open (CONTRACT §9a); the platforms' own calls carry no token.
    monkeypatch.setenv("AI_MARKING_FUNCTION_TOKEN", "e2e-function-token")
    monkeypatch.setenv("AI_MARK_SIMULATE_FAILURE_RATE", "0")


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoLambda]:
    server = MotoLambda()
    try:
        server.start()
        yield server
    finally:
        server.stop()


def app_env(db_url: str, **target: str) -> dict[str, str]:
    return {"DATABASE_URL": db_url, "MARKING_QUEUE_SECRET": SECRET,
            "QUEUE_MAX_IN_FLIGHT": "3", "QUEUE_MAX_ATTEMPTS": "2",
            "QUEUE_RETRY_BASE_SECONDS": "0", "QUEUE_BREAKER_THRESHOLD": "100",
            "QUEUE_TICK_SECONDS": "1", **target}


async def run_queue(app: AppProcess, conn: asyncpg.Connection, n: int) -> dict[str, Any]:
    """Enqueue n submissions through the real app and wait until none is live."""
    ids = await add_submissions(conn, n, "hw-native")
    app.start()
    try:
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
            r = await client.post("/api/marking/enqueue", headers={
                "authorization": f"Bearer {SECRET}"}, json={
                "assignment_id": "hw-native", "submission_ids": [str(i) for i in ids],
                "payload": {"rubric": "- names the key idea", "max_score": 5}})
            assert r.status_code == 202, r.text
            await drain(conn, timeout=120)
    finally:
        app.stop()
    rows = await conn.fetch("SELECT status, last_error FROM ai_marking_queue")
    history = await conn.fetch("SELECT outcome, error, dispatch_ref FROM ai_marking_attempts "
                               "WHERE kind = 'dispatch'")
    marked = await conn.fetchval("SELECT count(*) FROM submissions WHERE ai_result IS NOT NULL")
    return {"rows": rows, "history": history, "marked": marked}


def assert_all_completed(seen: dict[str, Any], refs: list[str]) -> None:
    assert {r["status"] for r in seen["rows"]} == {"completed"}
    assert seen["marked"] == ROWS
    # One dispatch per row, each carrying the platform's id for that invocation.
    assert len(seen["history"]) == ROWS
    assert sorted(h["dispatch_ref"] for h in seen["history"]) == sorted(refs)


def assert_all_failed(seen: dict[str, Any], code: str) -> None:
    assert {(r["status"], r["last_error"]) for r in seen["rows"]} == {("failed", code)}
    assert seen["marked"] == 0
    assert {h["error"] for h in seen["history"]} == {code}
    assert {h["dispatch_ref"] for h in seen["history"]} == {None}


def do_target(port: int, auth: str) -> dict[str, str]:
    return {"AI_MARKING_DISPATCH": "digitalocean",
            "DO_FUNCTIONS_API_HOST": f"http://127.0.0.1:{port}",
            "DO_FUNCTIONS_NAMESPACE": NAMESPACE, "DO_FUNCTIONS_ACTION": "ai-mark/mark",
            "DO_FUNCTIONS_AUTH": auth}


async def test_digitalocean_marks_every_row_through_the_functions_api(
    db_url: str, conn: asyncpg.Connection
):
    platform = DoFunctions(NAMESPACE, "ai-mark/mark", DO_KEY)
    port = free_port()
    with run_asgi(platform.app, port):
        seen = await run_queue(AppProcess(app_env(db_url, **do_target(port, DO_KEY)),
                                          free_port()), conn, ROWS)
    assert_all_completed(seen, platform.activations)
    assert platform.background.runs == ROWS and platform.refused == []


async def test_digitalocean_refuses_a_wrong_key_and_the_rows_fail(
    db_url: str, conn: asyncpg.Connection
):
    platform = DoFunctions(NAMESPACE, "ai-mark/mark", DO_KEY)
    port = free_port()
    wrong = DO_KEY.replace("do-secret", "not-the")
    with run_asgi(platform.app, port):
        seen = await run_queue(AppProcess(app_env(db_url, **do_target(port, wrong)),
                                          free_port()), conn, 3)
    assert_all_failed(seen, "do_http_401")
    assert platform.background.runs == 0 and set(platform.refused) == {401}


def lambda_target(endpoint: str, key_id: str, secret: str, function: str) -> dict[str, str]:
    return {"AI_MARKING_DISPATCH": "lambda", "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret,
            "AI_MARKING_LAMBDA_FUNCTION": function, "AWS_ENDPOINT_URL_LAMBDA": endpoint}


async def test_lambda_marks_every_row_through_signed_event_invokes(
    db_url: str, conn: asyncpg.Connection, moto: MotoLambda
):
    proxy = LambdaProxy(moto.url, moto=moto)
    port = free_port()
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:ai-mark"
    with run_asgi(proxy.app, port):
        env = lambda_target(f"http://127.0.0.1:{port}", moto.key_id, moto.secret, arn)
        seen = await run_queue(AppProcess(app_env(db_url, **env), free_port()), conn, ROWS)
    assert_all_completed(seen, proxy.request_ids)
    assert proxy.background.runs == ROWS and proxy.refused == []


async def test_lambda_refuses_a_wrong_secret_and_the_rows_fail(
    db_url: str, conn: asyncpg.Connection, moto: MotoLambda
):
    proxy = LambdaProxy(moto.url, moto=moto)
    port = free_port()
    with run_asgi(proxy.app, port):
        env = lambda_target(f"http://127.0.0.1:{port}", moto.key_id, "not-" + moto.secret,
                            "ai-mark")
        seen = await run_queue(AppProcess(app_env(db_url, **env), free_port()), conn, 3)
    assert_all_failed(seen, "lambda_http_403")
    assert proxy.background.runs == 0 and set(proxy.refused) == {403}
