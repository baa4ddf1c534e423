"""Dispatch to DigitalOcean Functions and AWS Lambda: every answer class, respx-mocked."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any
from unittest import mock

import httpx
import pytest
import respx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from aiqueue import dispatch
from aiqueue.dispatch.platform import LambdaTimeout
from aiqueue.queue import loop
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from aiqueue.settings.targets import DoTarget, LambdaTarget
from aiqueue.tokens import Tokens
from tests.unit.fakes import FakeStore, make_job

SECRET = "unit-secret-0123456789abcdef"
DO_HOST = "https://faas-nyc1-2ef2e6cc.doserverless.co"
DO_URL = f"{DO_HOST}/api/v1/namespaces/fn-ns/actions/ai-mark/mark?blocking=false"
LAMBDA_HOST = "https://lambda.eu-west-1.amazonaws.com"
LAMBDA_URL = f"{LAMBDA_HOST}/2015-03-31/functions/ai-mark/invocations?Qualifier=live"
REQUEST_ID = "7f1c9b2e-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
ACTIVATION_ID = "2f9f0e4c8b6d4c3aa2a1f0e4c8b6d4c3"


def settings(target: str, **kw: Any) -> Settings:
    base = Settings(
        queue_secrets=(SECRET,), app_base_url="http://app.test",
        callback_url="http://app.test/webhooks/ai-mark", dispatch_timeout_seconds=0.5,
        retry_max_seconds=300, dispatch_target=target,  # type: ignore[arg-type]
        digitalocean=DoTarget(DO_HOST, "fn-ns", "ai-mark", "mark", "uuid-1", "key-2"),
        aws_lambda=LambdaTarget("eu-west-1", "AKIDEXAMPLE", "secret", "session", "ai-mark",
                                "live", LAMBDA_HOST),
    )
    return base.with_overrides(**kw)


URLS = {"digitalocean": DO_URL, "lambda": LAMBDA_URL}
PREFIX = {"digitalocean": "do", "lambda": "lambda"}


def accepted(target: str) -> httpx.Response:
    if target == "lambda":
        return httpx.Response(202, headers={"x-amzn-RequestId": REQUEST_ID})
    return httpx.Response(202, json={"activationId": ACTIVATION_ID})


async def send(client: httpx.AsyncClient, target: str, **kw: Any) -> dispatch.Outcome:
    return await dispatch.send(client, make_job(**kw), settings(target).target(), Tokens(SECRET))


@respx.mock
async def test_digitalocean_invokes_the_action_without_blocking(client: httpx.AsyncClient):
    route = respx.post(DO_URL).mock(return_value=accepted("digitalocean"))
    job = make_job()
    outcome = await dispatch.send(client, job, settings("digitalocean").target(), Tokens(SECRET))
    assert outcome == dispatch.Accepted(ref=ACTIVATION_ID)
    request = route.calls.last.request
    assert request.url.params["blocking"] == "false"
    assert request.headers["authorization"] == "Basic " + base64.b64encode(
        b"uuid-1:key-2").decode()
    body = json.loads(request.content)
    assert body == dispatch.dispatch_body(job, settings("digitalocean").target(), Tokens(SECRET))


@respx.mock
async def test_lambda_invokes_asynchronously_with_a_valid_sigv4(client: httpx.AsyncClient):
    route = respx.post(LAMBDA_URL).mock(return_value=accepted("lambda"))
    assert await send(client, "lambda") == dispatch.Accepted(ref=REQUEST_ID)
    request = route.calls.last.request
    assert request.headers["x-amz-invocation-type"] == "Event"
    assert request.headers["x-amz-security-token"] == "session"
    # Recompute the signature with botocore from what actually went on the wire.
    signed = request.headers["authorization"].split("SignedHeaders=")[1].split(",")[0]
    headers = {n: request.headers[n] for n in signed.split(";") if n not in (
        "x-amz-date", "x-amz-security-token")}
    stamp = datetime.strptime(request.headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
    boto = AWSRequest(method="POST", url=str(request.url), headers=headers,
                      data=request.content)
    with mock.patch("botocore.auth.get_current_datetime", return_value=stamp):
        SigV4Auth(Credentials("AKIDEXAMPLE", "secret", "session"), "lambda",
                  "eu-west-1").add_auth(boto)
    assert request.headers["authorization"] == boto.headers["Authorization"]


@respx.mock
@pytest.mark.parametrize("target", ["digitalocean", "lambda"])
@pytest.mark.parametrize(("answer", "expected"), [
    (httpx.Response(429, headers={"retry-after": "7"}), dispatch.Busy(7.0, 429)),
    (httpx.Response(503), dispatch.Busy(None, 503)),
    (httpx.Response(503, headers={"retry-after": "2"}), dispatch.Busy(2.0, 503)),
    (httpx.Response(401), "401"),
    (httpx.Response(403), "403"),
    (httpx.Response(404), "404"),
    (httpx.Response(500), "500"),
    (httpx.Response(200, json={}), "200"),
    (httpx.Response(302, headers={"location": "https://elsewhere.test/"}), "302"),
])
async def test_answer_classes(client: httpx.AsyncClient, target: str, answer: httpx.Response,
                              expected: Any):
    respx.post(URLS[target]).mock(return_value=answer)
    if isinstance(expected, str):
        code = int(expected)
        expected = dispatch.Failed(f"{PREFIX[target]}_http_{code}", code)
    assert await send(client, target) == expected


@respx.mock
@pytest.mark.parametrize("target", ["digitalocean", "lambda"])
@pytest.mark.parametrize(("effect", "code"), [
    (httpx.ConnectTimeout("slow"), "dispatch_timeout"),
    (httpx.ReadTimeout("slow"), "dispatch_timeout"),
    (httpx.ConnectError("refused"), "dispatch_connect_error"),
    (httpx.ReadError("reset"), "dispatch_transport_error"),
    (httpx.RemoteProtocolError("truncated"), "dispatch_transport_error"),
    (RuntimeError("anything else"), "dispatch_error"),
])
async def test_errors_are_failed_attempts_never_exceptions(
    client: httpx.AsyncClient, target: str, effect: Exception, code: str
):
    respx.post(URLS[target]).mock(side_effect=effect)
    assert await send(client, target) == dispatch.Failed(code)


@respx.mock
@pytest.mark.parametrize("target", ["digitalocean", "lambda"])
async def test_accepted_without_a_usable_id_keeps_no_id(client: httpx.AsyncClient, target: str):
    respx.post(URLS[target]).mock(return_value=httpx.Response(
        202, text="not json", headers={"x-amzn-RequestId": "<script>"}))
    assert await send(client, target) == dispatch.Accepted(ref=None)


@respx.mock
@pytest.mark.parametrize("target", ["digitalocean", "lambda"])
async def test_oversized_payload_fails_without_a_request(client: httpx.AsyncClient, target: str):
    route = respx.post(URLS[target]).mock(return_value=accepted(target))
    big = {"rubric": "x" * (1024 * 1024)}
    assert await send(client, target, payload=big) == dispatch.Failed(
        "payload_too_large", None, retryable=False)
    assert route.call_count == 0
    # Just under the limit goes out.
    body = json.dumps(dispatch.dispatch_body(make_job(), settings(target).target(), Tokens(SECRET)))
    fits = {"rubric": "x" * (1024 * 1024 - len(body) - 20)}
    assert isinstance(await send(client, target, payload=fits), dispatch.Accepted)
    respx.post(URLS[target]).mock(return_value=httpx.Response(413))
    assert await send(client, target) == dispatch.Failed("payload_too_large", 413,
                                                         retryable=False)


def runtime(store: FakeStore, client: httpx.AsyncClient, target: str) -> Runtime[FakeStore]:
    s = settings(target, retry_base_seconds=10)
    # Lambda's timeout as if read already (tests/unit/test_recovery.py reads it).
    return Runtime(settings=s, store=store, http=client, tokens=Tokens(SECRET),
                   owned={LambdaTimeout: LambdaTimeout(value=60.0)})


@respx.mock
@pytest.mark.parametrize("target", ["digitalocean", "lambda"])
async def test_the_invocation_id_goes_into_the_attempt_history(
    client: httpx.AsyncClient, target: str
):
    respx.post(URLS[target]).mock(return_value=accepted(target))
    job = make_job()
    store = FakeStore(jobs=[job])
    step = await loop.process_step(runtime(store, client, target))
    assert step.dispatched
    ref = REQUEST_ID if target == "lambda" else ACTIVATION_ID
    assert store.args_of("set_dispatch_ref") == (job.queue_id, job.dispatch_seq, ref)


@respx.mock
async def test_a_lost_invocation_id_does_not_fail_the_accepted_dispatch(
    client: httpx.AsyncClient,
):
    respx.post(LAMBDA_URL).mock(return_value=accepted("lambda"))
    store = FakeStore(jobs=[make_job()], ref_fails=True)
    step = await loop.process_step(runtime(store, client, "lambda"))
    assert step.dispatched and "attempt_failed" not in store.names()


@respx.mock
async def test_a_payload_too_large_fails_the_row_at_once_outside_the_breaker(
    client: httpx.AsyncClient,
):
    store = FakeStore(jobs=[make_job(payload={"rubric": "x" * 2_000_000})])
    await loop.process_step(runtime(store, client, "lambda"))
    _qid, _seq, kw = store.args_of("attempt_failed")
    assert kw["error"] == "payload_too_large" and kw["retryable"] is False
    assert "breaker_failure" not in store.names()
