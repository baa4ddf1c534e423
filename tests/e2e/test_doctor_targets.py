"""The doctor's function and probe checks per native target, through the emulators: DigitalOcean
(Basic auth checked) and Lambda in moto (SigV4 and policy checked; and AWS_ROLE_ARN exchanged
with Vercel's OIDC token through moto's STS)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import pytest

from tests.e2e.doctor_cli import by_name, doctor
from tests.e2e.emulators import ACCOUNT, REGION, DoFunctions, LambdaProxy, MotoLambda
from tests.e2e.servers import AppProcess, free_port, run_asgi
from tests.e2e.targets_kit import (
    DO_KEY,
    NAMESPACE,
    app_env,
    do_target,
    lambda_target,
    run_queue,
)
from tests.roles import RuntimeDb

# One worker starts the Lambda emulators once for every test here.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("doctor_targets")]
ROLE = f"arn:aws:iam::{ACCOUNT}:role/aiqueue-dispatch"
ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:ai-mark"


@pytest.fixture(autouse=True)
def reference_function_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference function runs in this process (the emulators start it): the simulator."""
    monkeypatch.setenv("AI_MARK_BACKEND", "simulate")
    monkeypatch.setenv("AI_MARK_SIMULATE_LATENCY", "0")
    # The action never runs open (docs/deploying/index.md); the platforms' own calls carry no token.
    monkeypatch.setenv("AI_MARKING_FUNCTION_TOKEN", "e2e-function-token")


def _moto(auth: bool) -> Iterator[MotoLambda]:
    server = MotoLambda(auth=auth)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoLambda]:
    yield from _moto(auth=True)


@pytest.fixture(scope="module")
def moto_sts() -> Iterator[MotoLambda]:
    yield from _moto(auth=False)


async def check(env: dict[str, str]) -> tuple[int, dict[str, dict[str, str]]]:
    """serve with `env`, then the doctor with the same environment."""
    app = AppProcess(env, free_port())
    app.start()
    try:
        code, report, _ = await asyncio.to_thread(doctor, {**env, "APP_BASE_URL": app.url})
    finally:
        app.stop()
    return code, by_name(report)


# The app and the doctor log in as a runtime role (the doctor fails a superuser).
async def test_digitalocean_probe_round_trip_and_a_wrong_key(runtime_db: RuntimeDb):
    db_url = runtime_db.runtime_dsn
    platform = DoFunctions(NAMESPACE, "ai-mark/mark", DO_KEY)
    port = free_port()
    with run_asgi(platform.app, port):
        code, good = await check(app_env(db_url, **do_target(port, DO_KEY)))
        wrong_key = DO_KEY.replace("do-secret", "not-the")
        bad_code, bad = await check(app_env(db_url, **do_target(port, wrong_key)))
    assert code == 0, good
    assert good["function"]["status"] == "pass"
    assert platform.activations[0] in good["function"]["detail"]  # the activation id
    assert good["probe"]["status"] == "pass"
    assert bad_code == 1 and bad["function"]["status"] == "fail"
    assert "DO_FUNCTIONS_AUTH" in bad["function"]["detail"] and bad["probe"]["status"] == "skip"
    # doctor() runs the CLI twice (JSON, text): two probes each way.
    assert platform.background.runs == 2 and platform.refused == [401, 401]


async def test_lambda_probe_round_trip_and_refused_placeholders(runtime_db: RuntimeDb,
                                                                 moto: MotoLambda):
    db_url = runtime_db.runtime_dsn
    proxy = LambdaProxy(moto.url)
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with run_asgi(proxy.app, port):
        code, good = await check(app_env(db_url, **lambda_target(
            endpoint, moto.key_id, moto.secret, ARN)))
        # What Vercel may inject: keys that grant nothing, and a session token beside them.
        placeholders = {**lambda_target(endpoint, "ASIAVERCELPLACEHOLDER", "vercel-placeholder",
                                        ARN), "AWS_SESSION_TOKEN": "vercel-session"}
        bad_code, bad = await check(app_env(db_url, **placeholders))
    assert code == 0, good
    assert good["probe"]["status"] == "pass" and proxy.request_ids[0] in good["function"]["detail"]
    assert bad_code == 1 and bad["function"]["status"] == "fail"
    detail = bad["function"]["detail"]
    assert "HTTP 403" in detail
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"):
        assert name in detail
    assert "placeholders" in detail and "AWS_ROLE_ARN" in bad["function"]["fix"]
    assert proxy.background.runs == 2  # the two good probes (doctor() runs the CLI twice)


async def test_lambda_with_a_role_assumed_through_vercels_oidc_token(
    runtime_db: RuntimeDb, moto_sts: MotoLambda
):
    db_url = runtime_db.runtime_dsn
    conn = await asyncpg.connect(runtime_db.owner_dsn)
    proxy = LambdaProxy(moto_sts.url)
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    role = {"AI_MARKING_DISPATCH": "lambda", "AWS_REGION": REGION, "AWS_ROLE_ARN": ROLE,
            "AI_MARKING_LAMBDA_FUNCTION": ARN, "AWS_ENDPOINT_URL_LAMBDA": endpoint,
            "AWS_ENDPOINT_URL_STS": endpoint, "VERCEL_OIDC_TOKEN": "eyJ.vercel-oidc.token"}
    with run_asgi(proxy.app, port):
        code, report = await check(app_env(db_url, **role))
        doctor_exchanges = proxy.sts_calls
        seen = await run_queue(AppProcess(app_env(db_url, **role), free_port()), conn, 6)
        missing_code, missing = await check(app_env(
            db_url, **{k: v for k, v in role.items() if k != "VERCEL_OIDC_TOKEN"}))
    await conn.close()
    assert code == 0, report
    # One per process: the two doctor runs (doctor() runs the CLI twice) and the serving
    # instance beside them, whose recovery reads the function's timeout signed as the
    # role too (docs/deploying/index.md).
    assert doctor_exchanges == 3
    assert {r["status"] for r in seen["rows"]} == {"completed"} and seen["marked"] == 6
    # One more for the next serving instance's six dispatches and its timeout read
    # (cached); none without a token.
    assert proxy.sts_calls == 4
    # Every invoke was signed with the short-lived keys STS handed out, never a static one.
    assert proxy.signed_with and all(k.startswith("ASIA") for k in proxy.signed_with)
    # ...and so was each read of the function's timeout, the bound of.
    assert proxy.configuration_signed_with
    assert all(k.startswith("ASIA") for k in proxy.configuration_signed_with)
    assert missing_code == 1 and "no Vercel OIDC token" in missing["function"]["detail"]
