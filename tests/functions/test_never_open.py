"""The reference function is never open (docs/deploying/index.md): without a token or a signing
secret it refuses to start except on a local address, and every entry point (the
server, the DigitalOcean web action, the Lambda function URL) checks the token
and, when the secret is set, the signature over the raw body."""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import respx

from aiqueue.dispatch.targets import http_request
from aiqueue.settings import Settings as AppSettings
from functions.ai_mark import __main__ as cli
from functions.ai_mark import do_main, lambda_handler
from functions.ai_mark.errors import SettingsError
from functions.ai_mark.settings import Settings, is_local_host, require_closed

from .conftest import CALLBACK_URL, make_dispatch
from .events import url_event, web_event

TOKEN = "fn-secret"
SECRET = "whsec_" + base64.b64encode(b"never-open-signing-key-0123456789").decode()
OPEN_ENV = ("AI_MARKING_FUNCTION_TOKEN", "AI_MARKING_SIGNING_SECRET")


def test_an_open_function_refuses_to_start_except_on_a_local_address() -> None:
    with pytest.raises(SettingsError, match="AI_MARKING_FUNCTION_TOKEN"):
        require_closed(Settings())
    require_closed(Settings(), local=True)
    require_closed(Settings(function_token=TOKEN))
    require_closed(Settings(signing_secret=SECRET))
    assert all(map(is_local_host, ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.1.1"]))
    assert not any(map(is_local_host, ["0.0.0.0", "::", "10.0.0.5", "fn.example.com"]))


def test_the_server_will_not_listen_openly_on_a_public_address(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in OPEN_ENV:
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "AI_MARKING_FUNCTION_TOKEN" in err[0]


@pytest.mark.parametrize(("entry", "event"), [
    (do_main.main, web_event(make_dispatch(), token=None)),
    (do_main.main, make_dispatch()),  # a plain invoke: the action still will not run open
    (lambda_handler.handler, url_event(make_dispatch(), token=None)),
    (lambda_handler.handler, make_dispatch()),
])
def test_serverless_entry_points_refuse_to_run_open(
    monkeypatch: pytest.MonkeyPatch, respx_mock: respx.MockRouter, entry: Any,
    event: dict[str, Any]
) -> None:
    for name in OPEN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AI_MARK_SIMULATE_LATENCY", "0")
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    answer = entry(event, None)
    assert answer["statusCode"] == 500
    body = answer["body"] if isinstance(answer["body"], dict) else json.loads(answer["body"])
    assert body["error"] == "misconfigured" and "AI_MARKING_FUNCTION_TOKEN" in body["detail"]
    assert not route.called  # no model call, no POST anywhere


def signed_headers(body: bytes, seq: int) -> dict[str, str]:
    """What the app sends (aiqueue's own signing code), with the bearer."""
    app = AppSettings(signing_secret=SECRET, function_url="https://fn.test/mark",
                      function_token=TOKEN)
    request = http_request(app.target(), body, datetime.now(UTC), f"{uuid.uuid4()}.{seq}")
    return request.headers


def do_signed(body: bytes, headers: dict[str, str]) -> dict[str, Any]:
    return {"http": {"body": body.decode(), "headers": headers, "method": "POST",
                     "path": "", "queryString": ""}}


def lambda_signed(body: bytes, headers: dict[str, str]) -> dict[str, Any]:
    event = url_event({})
    event["headers"] = headers
    event["body"] = base64.b64encode(body).decode()
    return event


@pytest.mark.parametrize(("handle", "shape"), [
    (do_main.handle, do_signed),
    (lambda_handler.handle, lambda_signed),
])
async def test_web_entry_points_check_the_signature_when_the_secret_is_set(
    sim_settings: Settings, handle: Any, shape: Any
) -> None:
    settings = dataclasses.replace(sim_settings, function_token=TOKEN, signing_secret=SECRET)
    body = json.dumps(make_dispatch()).encode()
    good = signed_headers(body, 1)
    unsigned = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    tampered = json.dumps(make_dispatch(callback_url="https://evil.test/x")).encode()
    no_token = {k: v for k, v in good.items() if k != "authorization"}
    for name, event, status in [
        ("unsigned", shape(body, unsigned), 401),
        ("tampered", shape(tampered, good), 401),
        ("no bearer", shape(body, no_token), 401),
        ("signed", shape(body, good), 200),
        ("replayed", shape(body, good), 409),
        ("a new dispatch", shape(body, signed_headers(body, 2)), 200),
    ]:
        answer = await handle(event, settings)
        assert answer["statusCode"] == status, name


async def test_a_parsed_web_event_cannot_be_verified_so_a_signed_action_refuses_it(
    sim_settings: Settings
) -> None:
    settings = dataclasses.replace(sim_settings, signing_secret=SECRET)
    event = {**make_dispatch(), "http": {"headers": {}, "method": "post"}}  # `web: true`
    answer = await do_main.handle(event, settings)
    assert answer["statusCode"] == 401 and answer["body"]["error"] == "bad_signature"
