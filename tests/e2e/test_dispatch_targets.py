"""End to end per native target: `aiqueue serve` → emulated platform → reference function → webhook.

DigitalOcean: an OpenWhisk-shaped API that checks Basic auth and blocking=false.
Lambda: moto in server mode with IAM authentication on (SigV4 and policy checked).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from tests.e2e.emulators import ACCOUNT, REGION, DoFunctions, LambdaProxy, MotoLambda
from tests.e2e.servers import AppProcess, free_port, run_asgi
from tests.e2e.targets_kit import DO_KEY, NAMESPACE, app_env, do_target, lambda_target, run_queue

# One worker starts the Lambda emulator once for every test here.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("dispatch_targets")]

ROWS = 12


@pytest.fixture(autouse=True)
def reference_function_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference function runs in this process: the simulator, answering at once."""
    monkeypatch.setenv("AI_MARK_BACKEND", "simulate")
    monkeypatch.setenv("AI_MARK_SIMULATE_LATENCY", "0")
    # The action never runs open (docs/deploying/index.md); the platforms' own calls carry no token.
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
