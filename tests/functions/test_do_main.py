"""The DigitalOcean Functions entry point with web and plain (async) events."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import httpx
import pytest
import respx

from functions.ai_mark import do_main
from functions.ai_mark.settings import Settings

from .conftest import CALLBACK_URL, make_dispatch
from .events import TOKEN, web_event


@pytest.fixture
def settings(sim_settings: Settings) -> Settings:
    return dataclasses.replace(sim_settings, function_token=TOKEN)


async def test_web_raw_event_answers_with_the_result_item(settings: Settings) -> None:
    response = await do_main.handle(web_event(make_dispatch()), settings)
    assert response["statusCode"] == 200
    item = response["body"]
    assert item["queue_id"] == make_dispatch()["queue_id"] and item["token"] == "signed-token"
    assert item["status"] == "completed" and item["result"]["max_score"] == 10


async def test_web_raw_base64_body(settings: Settings) -> None:
    event = web_event(base64.b64encode(json.dumps(make_dispatch()).encode()).decode())
    event["http"]["isBase64Encoded"] = True
    response = await do_main.handle(event, settings)
    assert response["statusCode"] == 200 and response["body"]["status"] == "completed"


async def test_web_true_event_with_parsed_parameters(settings: Settings) -> None:
    event = {**make_dispatch(), "http": {"headers": {"authorization": f"Bearer {TOKEN}"}}}
    event["http"]["method"] = "post"
    response = await do_main.handle(event, settings)
    assert response["statusCode"] == 200 and response["body"]["status"] == "completed"


async def test_openwhisk_raw_event(settings: Settings) -> None:
    event = {
        "__ow_method": "post",
        "__ow_headers": {"Authorization": f"Bearer {TOKEN}"},
        "__ow_body": base64.b64encode(json.dumps(make_dispatch()).encode()).decode(),
        "__ow_path": "",
    }
    response = await do_main.handle(event, settings)
    assert response["statusCode"] == 200 and response["body"]["status"] == "completed"


async def test_bad_content_is_a_200_with_a_non_retryable_failure(settings: Settings) -> None:
    dispatch = make_dispatch(submission={"id": "s", "assignment_id": "hw-7", "content": ""})
    response = await do_main.handle(web_event(dispatch), settings)
    assert response["statusCode"] == 200
    assert response["body"]["error"] == "invalid_input"
    assert response["body"]["retryable"] is False


@pytest.mark.parametrize("token", [None, "wrong", ""])
async def test_wrong_or_missing_token_is_401(settings: Settings, token: str | None) -> None:
    response = await do_main.handle(web_event(make_dispatch(), token=token), settings)
    assert response["statusCode"] == 401
    assert response["body"]["error"] == "unauthorized"


async def test_no_token_configured_means_open(sim_settings: Settings) -> None:
    response = await do_main.handle(web_event(make_dispatch(), token=None), sim_settings)
    assert response["statusCode"] == 200


@pytest.mark.parametrize(
    ("event", "status", "code"),
    [
        (web_event("{not json"), 400, "invalid_json"),
        (web_event("[1, 2]"), 422, "invalid_dispatch"),
        (web_event(make_dispatch(queue_id=None)), 422, "invalid_dispatch"),
        (web_event(make_dispatch(), method="GET"), 405, "method_not_allowed"),
    ],
)
async def test_web_errors(
    settings: Settings, event: dict[str, Any], status: int, code: str
) -> None:
    response = await do_main.handle(event, settings)
    assert response["statusCode"] == status
    assert response["body"]["error"] == code and response["body"]["detail"]


async def test_async_invocation_posts_to_the_callback(
    settings: Settings, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    response = await do_main.handle(make_dispatch(), settings)
    assert response["statusCode"] == 202
    assert response["body"] == {
        "accepted": True,
        "queue_id": make_dispatch()["queue_id"],
        "status": "completed",
        "delivered": True,
    }
    (item,) = json.loads(route.calls.last.request.content)
    assert item["status"] == "completed" and item["token"] == "signed-token"
    # The activation keeps the posted items: the queue applies them if the POST was lost.
    assert response["callback"] == [item]


async def test_async_invocation_returns_the_items_even_when_the_callback_is_lost(
    settings: Settings, respx_mock: respx.MockRouter
) -> None:
    respx_mock.post(CALLBACK_URL).mock(side_effect=httpx.ConnectError("gone"))
    response = await do_main.handle(make_dispatch(), settings)
    assert response["body"]["delivered"] is False
    (item,) = response["callback"]
    assert item["status"] == "completed" and item["token"] == "signed-token"
    assert item["result"]["score"] is not None


async def test_async_invocation_without_callback_url_is_422(settings: Settings) -> None:
    response = await do_main.handle(make_dispatch(callback_url="ftp://x"), settings)
    assert response["statusCode"] == 422


def test_main_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AI_MARK_SIMULATE_LATENCY", "0")
    monkeypatch.setenv("AI_MARKING_FUNCTION_TOKEN", TOKEN)
    assert do_main.main(web_event(make_dispatch()), None)["statusCode"] == 200
    assert do_main.main(web_event(make_dispatch(), token="nope"), None)["statusCode"] == 401


def test_main_takes_a_non_blocking_rest_invocation_and_calls_back(
    monkeypatch: pytest.MonkeyPatch, respx_mock: respx.MockRouter
) -> None:
    """`POST …/actions/ai-mark/mark?blocking=false`: the params are the dispatch itself."""
    monkeypatch.setenv("AI_MARK_SIMULATE_LATENCY", "0")
    monkeypatch.setenv("AI_MARKING_FUNCTION_TOKEN", TOKEN)  # guards the web URL only
    route = respx_mock.post(CALLBACK_URL).mock(return_value=httpx.Response(200))
    params = json.loads(json.dumps(make_dispatch()))  # as OpenWhisk parses the body
    response = do_main.main(params, None)
    assert response["statusCode"] == 202 and response["body"]["delivered"] is True
    (item,) = json.loads(route.calls.last.request.content)
    assert item["queue_id"] == params["queue_id"] and item["token"] == params["callback_token"]
    assert item["status"] == "completed"


def test_main_reports_a_bad_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AI_MARK_BACKEND", "magic")
    response = do_main.main(web_event(make_dispatch()), None)
    assert response["statusCode"] == 500
    assert response["body"]["error"] == "misconfigured"
    assert "AI_MARK_BACKEND" in response["body"]["detail"]
