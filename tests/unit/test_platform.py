"""Asking the platform about an invocation (aiqueue/dispatch/platform.py), respx-mocked."""

from __future__ import annotations

import asyncio
import base64
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from aiqueue.dispatch.platform import (
    Activation,
    LambdaTimeout,
    activation,
    activation_url,
    configuration_url,
    read_activation,
)
from aiqueue.errors import SettingsError
from aiqueue.settings import load_settings
from aiqueue.settings.targets import DoTarget, LambdaTarget, load_digitalocean

DO = DoTarget("https://faas.test", "fn-ns", "ai-mark", "mark", "user", "key")
LAMBDA = LambdaTarget("eu-west-1", "AKID", "secret", None, "ai-mark", "live",
                      "https://lambda.eu-west-1.amazonaws.com")


def record(status: str, result: Any) -> dict[str, Any]:
    return {"activationId": "a1", "end": 2, "duration": 1,
            "response": {"status": status, "success": status == "success", "result": result}}


@pytest.mark.parametrize(("given", "expected"), [
    (record("success", {"callback": [{"queue_id": "q"}]}),
     Activation("finished", ({"queue_id": "q"},))),
    (record("success", {"statusCode": 202}), Activation("finished")),
    (record("success", None), Activation("finished")),
    (record("action developer error",
            {"error": "The action exceeded its time limits of 600000 milliseconds."}),
     Activation("failed", code="activation_timeout")),
    (record("action developer error",
            {"error": "The action exhausted its memory and was aborted."}),
     Activation("failed", code="activation_out_of_memory")),
    (record("application error", {"error": "the student's answer, quoted"}),
     Activation("failed", code="activation_error")),
    (record("action developer error", {"error": "boom"}),
     Activation("failed", code="activation_crashed")),
    (record("whisk internal error", {}), Activation("failed", code="activation_platform_error")),
    (record("something new", "x"), Activation("failed", code="activation_failed")),
    ({"no": "response"}, Activation("unknown", code="activation_unreadable")),
    ([], Activation("unknown", code="activation_unreadable")),
])
def test_an_activation_record_is_read_into_content_free_codes(given: Any, expected: Activation):
    assert read_activation(given) == expected


@respx.mock
@pytest.mark.parametrize(("answer", "expected"), [
    (httpx.Response(404, json={"error": "The requested resource does not exist."}),
     Activation("not_found")),
    (httpx.Response(200, json=record("success", {"callback": []})), Activation("finished")),
    (httpx.Response(401, json={"error": "The supplied authentication is invalid."}),
     Activation("unknown", code="lookup_http_401")),
    (httpx.Response(200, content=b"<html>"), Activation("unknown", code="activation_unreadable")),
    (httpx.ConnectError("refused"), Activation("unknown", code="lookup_error")),
    (httpx.ReadTimeout("slow"), Activation("unknown", code="lookup_timeout")),
])
async def test_an_activation_is_read_with_the_namespace_key(answer: Any, expected: Activation):
    route = respx.get(activation_url(DO, "a1")).mock(side_effect=[answer])
    async with httpx.AsyncClient() as client:
        assert await activation(client, DO, "a1") == expected
    sent = route.calls.last.request
    assert sent.url == "https://faas.test/api/v1/namespaces/fn-ns/activations/a1"
    assert sent.headers["authorization"] == "Basic " + base64.b64encode(b"user:key").decode()


@respx.mock
async def test_lambdas_timeout_is_read_once_even_by_concurrent_steps():
    url = configuration_url(LAMBDA)
    assert url == ("https://lambda.eu-west-1.amazonaws.com/2015-03-31/functions/ai-mark/"
                   "configuration?Qualifier=live")

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.05)
        return httpx.Response(200, json={"FunctionName": "ai-mark", "Timeout": 900})
    route = respx.get(url).mock(side_effect=slow)
    cache = LambdaTimeout()
    async with httpx.AsyncClient() as client:
        got = await asyncio.gather(*(cache.get(client, LAMBDA) for _ in range(5)))
        assert got == [900.0] * 5 and await cache.get(client, LAMBDA) == 900.0
    assert route.call_count == 1
    auth = route.calls.last.request.headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKID/") and "/eu-west-1/lambda/" in auth


@respx.mock
async def test_an_unreadable_lambda_timeout_is_tried_again_later_not_every_step():
    route = respx.get(configuration_url(LAMBDA)).mock(return_value=httpx.Response(403))
    cache = LambdaTimeout()
    async with httpx.AsyncClient() as client:
        assert await cache.get(client, LAMBDA) is None
        assert await cache.get(client, LAMBDA) is None
        assert route.call_count == 1
        cache.retry_at = 0.0
        route.mock(return_value=httpx.Response(200, json={"Timeout": 30}))
        assert await cache.get(client, LAMBDA) == 30.0


def test_the_dead_invocation_settings_are_read_once_and_checked():
    s = load_settings({"QUEUE_HEARTBEAT_TIMEOUT_SECONDS": "45",
                       "QUEUE_PLATFORM_GRACE_SECONDS": "5"})
    assert (s.heartbeat_timeout_seconds, s.platform_grace_seconds) == (45.0, 5.0)
    assert load_settings({}).heartbeat_timeout_seconds == 90.0
    assert load_settings({}).platform_grace_seconds == 30.0
    for name, bad in (("QUEUE_HEARTBEAT_TIMEOUT_SECONDS", "soon"),
                      ("QUEUE_HEARTBEAT_TIMEOUT_SECONDS", "0"),
                      ("QUEUE_PLATFORM_GRACE_SECONDS", "-1")):
        with pytest.raises(SettingsError, match=name):
            load_settings({name: bad})


def shipped_action_limit() -> float:
    """limits.timeout (ms) of the shipped functions/ai_mark/project.yml, in seconds."""
    text = (Path(__file__).parents[2] / "functions" / "ai_mark" / "project.yml").read_text()
    found = re.findall(r"^\s+timeout:\s*(\d+)\s*$", text, re.MULTILINE)
    assert len(found) == 1, "project.yml sets one action limit"
    return int(found[0]) / 1000


def test_the_actions_time_limit_is_a_digitalocean_setting():
    env = {"DO_FUNCTIONS_API_HOST": "https://faas.test", "DO_FUNCTIONS_NAMESPACE": "fn-ns",
           "DO_FUNCTIONS_ACTION": "ai-mark/mark", "DO_FUNCTIONS_AUTH": "user:key"}
    # The default is the limit the shipped project.yml sets (docs/deploying/index.md).
    assert load_digitalocean(env).action_timeout_seconds == shipped_action_limit() == 300.0
    assert load_digitalocean({**env, "DO_FUNCTIONS_ACTION_TIMEOUT_SECONDS": "900"}
                             ).action_timeout_seconds == 900.0
    for bad in ("0", "ten", "1e9"):
        with pytest.raises(SettingsError, match="DO_FUNCTIONS_ACTION_TIMEOUT_SECONDS"):
            load_digitalocean({**env, "DO_FUNCTIONS_ACTION_TIMEOUT_SECONDS": bad})
