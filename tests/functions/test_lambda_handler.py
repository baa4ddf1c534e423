"""The AWS Lambda entry point with function URL, REST proxy and Event-invoke events."""

from __future__ import annotations

import dataclasses
import json

import httpx
import pytest
import respx

from functions.ai_mark import lambda_handler
from functions.ai_mark.settings import Settings

from .conftest import CALLBACK_URL, make_dispatch
from .events import TOKEN, url_event


@pytest.fixture
def settings(sim_settings: Settings) -> Settings:
    return dataclasses.replace(sim_settings, function_token=TOKEN)


async def test_function_url_answers_with_the_result_item(settings: Settings) -> None:
    response = await lambda_handler.handle(url_event(make_dispatch()), settings)
    assert response["statusCode"] == 200
    assert response["headers"]["content-type"] == "application/json"
    item = json.loads(response["body"])  # Lambda wants a string body
    assert item["status"] == "completed" and item["token"] == "signed-token"
    assert item["usage"]["model"] == "simulator"


async def test_rest_api_proxy_event_with_plain_body(settings: Settings) -> None:
    event = {
        "resource": "/mark",
        "httpMethod": "POST",
        "headers": {"Authorization": f"Bearer {TOKEN}"},
        "requestContext": {"resourcePath": "/mark", "stage": "prod"},
        "body": json.dumps(make_dispatch()),
        "isBase64Encoded": False,
    }
    response = await lambda_handler.handle(event, settings)
    assert response["statusCode"] == 200
    assert json.loads(response["body"])["status"] == "completed"


@pytest.mark.parametrize("token", [None, "wrong"])
async def test_function_url_token_check(settings: Settings, token: str | None) -> None:
    response = await lambda_handler.handle(url_event(make_dispatch(), token=token), settings)
    assert response["statusCode"] == 401
    assert json.loads(response["body"])["error"] == "unauthorized"


async def test_function_url_rejects_get(settings: Settings) -> None:
    response = await lambda_handler.handle(url_event({}, method="GET"), settings)
    assert response["statusCode"] == 405


async def test_function_url_with_broken_base64(settings: Settings) -> None:
    event = url_event(make_dispatch())
    event["body"] = "%%% not base64 %%%"
    response = await lambda_handler.handle(event, settings)
    assert response["statusCode"] == 400


async def test_event_invoke_posts_to_the_callback(
    settings: Settings, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    response = await lambda_handler.handle(make_dispatch(), settings)
    assert response["statusCode"] == 202
    assert json.loads(response["body"])["delivered"] is True
    (item,) = json.loads(route.calls.last.request.content)
    assert item["queue_id"] == make_dispatch()["queue_id"] and item["status"] == "completed"


async def test_event_invoke_reports_a_failure_through_the_callback(
    settings: Settings, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    dispatch = make_dispatch(payload={"rubric": "Mentions sunlight"})  # no max_score
    await lambda_handler.handle(dispatch, settings)
    (item,) = json.loads(route.calls.last.request.content)
    assert item["status"] == "failed"
    assert item["error"] == "invalid_input" and item["retryable"] is False


async def test_api_gateway_async_envelope_checks_the_token(
    settings: Settings, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    envelope = {"headers": {"authorization": "Bearer wrong"}, "body": make_dispatch()}
    assert (await lambda_handler.handle(envelope, settings))["statusCode"] == 401
    assert not route.called
    envelope["headers"] = {"authorization": f"Bearer {TOKEN}"}
    assert (await lambda_handler.handle(envelope, settings))["statusCode"] == 202
    assert route.call_count == 1


def test_handler_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch, respx_mock: respx.MockRouter
) -> None:
    monkeypatch.setenv("AI_MARK_SIMULATE_LATENCY", "0")
    monkeypatch.setenv("AI_MARKING_FUNCTION_TOKEN", TOKEN)
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    assert lambda_handler.handler(url_event(make_dispatch()), None)["statusCode"] == 200
    assert lambda_handler.handler(make_dispatch(), None)["statusCode"] == 202
    assert route.call_count == 1
