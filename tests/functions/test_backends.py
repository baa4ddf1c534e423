"""core.mark with the Ollama and OpenAI backends against recorded responses."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
import respx

from functions.ai_mark.backends import OllamaBackend, OpenAIBackend, make_backend
from functions.ai_mark.core import mark
from functions.ai_mark.probe import FUNCTION_VERSION
from functions.ai_mark.settings import Settings
from functions.ai_mark.simulate import SimulatorBackend

from .conftest import ANSWER, OLLAMA_URL, OPENAI_URL, make_dispatch

OLLAMA_CHAT = f"{OLLAMA_URL}/api/chat"
OPENAI_CHAT = f"{OPENAI_URL}/v1/chat/completions"
GOOD = {"score": 7, "feedback": "Good use of sunlight and chlorophyll; inputs are missing."}


def ollama_reply(content: str, prompt: int = 812, completion: int = 164) -> httpx.Response:
    """A recorded non-streaming /api/chat answer."""
    return httpx.Response(
        200,
        json={
            "model": "llama3.1:8b",
            "created_at": "2025-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": content},
            "done": True,
            "done_reason": "stop",
            "total_duration": 4_000_000_000,
            "prompt_eval_count": prompt,
            "eval_count": completion,
        },
    )


def openai_reply(content: str | None, prompt: int = 500, completion: int = 60) -> httpx.Response:
    """A recorded /v1/chat/completions answer."""
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        },
    )


def ollama(client: httpx.AsyncClient) -> OllamaBackend:
    return OllamaBackend(client, "llama3.1:8b", timeout=120, url=OLLAMA_URL)


def openai(client: httpx.AsyncClient, key: str | None = "sk-test") -> OpenAIBackend:
    return OpenAIBackend(client, "gpt-4o-mini", timeout=120, base_url=OPENAI_URL, api_key=key)


def sent(route: respx.Route, index: int = -1) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(route.calls[index].request.content)
    return body


async def test_ollama_good_output(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(OLLAMA_CHAT).mock(return_value=ollama_reply(json.dumps(GOOD)))
    async with httpx.AsyncClient() as client:
        item = await mark(make_dispatch(), ollama(client))
    assert item == {
        "queue_id": make_dispatch()["queue_id"],
        "token": "signed-token",
        "status": "completed",
        "result": {"score": 7, "max_score": 10, "feedback": GOOD["feedback"]},
        "usage": {"model": "llama3.1:8b", "prompt_tokens": 812, "completion_tokens": 164,
                  "provider": "ollama", "function_version": FUNCTION_VERSION},
    }
    body = sent(route)
    assert body["format"] == "json" and body["stream"] is False
    assert body["model"] == "llama3.1:8b"
    user = body["messages"][-1]["content"]
    assert "What is photosynthesis?" in user and ANSWER in user and "chlorophyll" in user
    assert "10" in body["messages"][0]["content"]


async def test_openai_good_output(respx_mock: respx.MockRouter) -> None:
    reply = json.dumps({"score": 8.5, "feedback": "Clear and mostly complete."})
    route = respx_mock.post(OPENAI_CHAT).mock(return_value=openai_reply(reply))
    async with httpx.AsyncClient() as client:
        item = await mark(make_dispatch(), openai(client))
    assert item["status"] == "completed"
    assert item["result"] == {
        "score": 8.5,
        "max_score": 10,
        "feedback": "Clear and mostly complete.",
    }
    assert item["usage"] == {
        "model": "gpt-4o-mini-2024-07-18",
        "prompt_tokens": 500,
        "completion_tokens": 60,
        "provider": "openai",
        "function_version": FUNCTION_VERSION,
    }
    request = route.calls.last.request
    assert request.headers["authorization"] == "Bearer sk-test"
    assert sent(route)["response_format"] == {"type": "json_object"}


async def test_openai_without_key_sends_no_authorization(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(OPENAI_CHAT).mock(return_value=openai_reply(json.dumps(GOOD)))
    async with httpx.AsyncClient() as client:
        await mark(make_dispatch(), openai(client, key=None))
    assert "authorization" not in route.calls.last.request.headers


@pytest.mark.parametrize("base", [OPENAI_URL, f"{OPENAI_URL}/", f"{OPENAI_URL}/v1"])
async def test_openai_base_url_with_or_without_v1(respx_mock: respx.MockRouter, base: str) -> None:
    route = respx_mock.post(OPENAI_CHAT).mock(return_value=openai_reply(json.dumps(GOOD)))
    async with httpx.AsyncClient() as client:
        backend = OpenAIBackend(client, "m", timeout=5, base_url=base, api_key=None)
        item = await mark(make_dispatch(), backend)
    assert item["status"] == "completed" and route.call_count == 1


async def test_malformed_then_repaired(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(OLLAMA_CHAT).mock(
        side_effect=[
            ollama_reply("Sure! The score is seven.", prompt=800, completion=10),
            ollama_reply(json.dumps(GOOD), prompt=900, completion=40),
        ]
    )
    async with httpx.AsyncClient() as client:
        item = await mark(make_dispatch(), ollama(client))
    assert item["status"] == "completed"
    assert item["result"]["score"] == 7
    # Both calls are billed.
    assert item["usage"]["prompt_tokens"] == 1700 and item["usage"]["completion_tokens"] == 50
    assert route.call_count == 2
    repair = sent(route, 1)["messages"]
    assert repair[-2] == {"role": "assistant", "content": "Sure! The score is seven."}
    assert "previous reply was invalid" in repair[-1]["content"]
    assert "not JSON" in repair[-1]["content"]


async def test_out_of_range_score_is_repaired(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(OPENAI_CHAT).mock(
        side_effect=[
            openai_reply(json.dumps({"score": 12, "feedback": "Great"})),
            openai_reply(json.dumps({"score": 10, "feedback": "Great"})),
        ]
    )
    async with httpx.AsyncClient() as client:
        item = await mark(make_dispatch(), openai(client))
    assert item["result"]["score"] == 10
    assert "between 0 and 10" in sent(route, 1)["messages"][-1]["content"]


async def test_malformed_twice_fails_retryable(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(OLLAMA_CHAT).mock(
        side_effect=[ollama_reply("not json"), ollama_reply('{"score": "lots", "feedback": ""}')]
    )
    async with httpx.AsyncClient() as client:
        item = await mark(make_dispatch(), ollama(client))
    assert item == {
        "queue_id": make_dispatch()["queue_id"],
        "token": "signed-token",
        "status": "failed",
        "error": "malformed_model_output",
        "retryable": True,
    }
    assert route.call_count == 2  # one repair, no more


async def test_openai_null_content_counts_as_malformed(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(OPENAI_CHAT).mock(side_effect=[openai_reply(None), openai_reply(None)])
    async with httpx.AsyncClient() as client:
        item = await mark(make_dispatch(), openai(client))
    assert item["error"] == "malformed_model_output" and item["retryable"] is True


@pytest.mark.parametrize(
    ("effect", "code"),
    [
        (httpx.ReadTimeout("timed out"), "model_timeout"),
        (httpx.ConnectTimeout("timed out"), "model_timeout"),
        (httpx.ConnectError("refused"), "model_unreachable"),
        (httpx.Response(502, text="bad gateway"), "model_http_502"),
        (httpx.Response(500, json={"error": "oops"}), "model_http_500"),
        (httpx.Response(200, text="<html>proxy error</html>"), "model_bad_response"),
    ],
)
async def test_transient_model_failures_are_retryable(
    respx_mock: respx.MockRouter, effect: Exception | httpx.Response, code: str
) -> None:
    respx_mock.post(OLLAMA_CHAT).mock(side_effect=[effect])
    async with httpx.AsyncClient() as client:
        item = await mark(make_dispatch(), ollama(client))
    assert item["status"] == "failed"
    assert item["error"] == code
    assert item["retryable"] is True


async def test_request_rejected_as_too_large_is_not_retryable(
    respx_mock: respx.MockRouter,
) -> None:
    respx_mock.post(OPENAI_CHAT).mock(return_value=httpx.Response(400, json={"error": "context"}))
    async with httpx.AsyncClient() as client:
        item = await mark(make_dispatch(), openai(client))
    assert item["error"] == "model_http_400" and item["retryable"] is False


@pytest.mark.parametrize(
    "broken",
    [
        {"submission": {"id": "s", "assignment_id": "hw-7", "content": "   "}},
        {"submission": {"id": "s", "assignment_id": "hw-7"}},
        {"payload": {"max_score": 10}},
        {"payload": {"rubric": "", "max_score": 10}},
        {"payload": {"rubric": "Mentions sunlight"}},
        {"payload": {"rubric": "Mentions sunlight", "max_score": 0}},
        {"payload": {"rubric": "Mentions sunlight", "max_score": True}},
        {"payload": "not an object"},
        {"attempt": 0},
    ],
)
async def test_bad_input_fails_without_retry_and_without_calling_the_model(
    respx_mock: respx.MockRouter, broken: dict[str, Any]
) -> None:
    route = respx_mock.post(OLLAMA_CHAT).mock(return_value=ollama_reply(json.dumps(GOOD)))
    async with httpx.AsyncClient() as client:
        item = await mark(make_dispatch(**broken), ollama(client))
    assert item["status"] == "failed"
    assert item["error"] == "invalid_input"
    assert item["retryable"] is False
    assert item["token"] == "signed-token"
    assert not route.called


async def test_unexpected_backend_crash_is_a_retryable_internal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Exploding:
        name = "exploding"

        async def mark(self, job: object) -> object:
            raise RuntimeError(f"boom: {ANSWER}")

    with caplog.at_level(logging.DEBUG):
        item = await mark(make_dispatch(), Exploding())  # type: ignore[arg-type]
    assert item["error"] == "internal_error" and item["retryable"] is True
    assert "RuntimeError" in caplog.text
    assert "SECRET-ANSWER-42" not in caplog.text


async def test_logs_never_contain_content_or_model_text(
    respx_mock: respx.MockRouter, caplog: pytest.LogCaptureFixture
) -> None:
    feedback = "PRIVATE-FEEDBACK-TEXT"
    respx_mock.post(OLLAMA_CHAT).mock(
        side_effect=[
            ollama_reply("MODEL-GARBAGE-TEXT"),
            ollama_reply(json.dumps({"score": 3, "feedback": feedback})),
        ]
    )
    with caplog.at_level(logging.DEBUG, logger="functions.ai_mark"):
        async with httpx.AsyncClient() as client:
            item = await mark(make_dispatch(), ollama(client))
    assert item["result"]["feedback"] == feedback
    assert make_dispatch()["queue_id"] in caplog.text  # ids are logged ...
    for secret in ("SECRET-ANSWER-42", feedback, "MODEL-GARBAGE-TEXT"):
        assert secret not in caplog.text  # ... content, results and model text never


async def test_make_backend_picks_the_named_backend() -> None:
    async with httpx.AsyncClient() as client:
        _check_factory(client)


def _check_factory(client: httpx.AsyncClient) -> None:
    assert isinstance(make_backend(Settings(), client), SimulatorBackend)
    ollama_backend = make_backend(Settings(backend="ollama", model="qwen2.5:7b"), client)
    assert isinstance(ollama_backend, OllamaBackend)
    assert ollama_backend.url == "http://127.0.0.1:11434/api/chat"
    assert ollama_backend.model == "qwen2.5:7b" and ollama_backend.timeout == 120
    openai_backend = make_backend(Settings(backend="openai", openai_api_key="k"), client)
    assert isinstance(openai_backend, OpenAIBackend)
    assert openai_backend.url == "https://api.openai.com/v1/chat/completions"
    assert openai_backend.headers == {"Authorization": "Bearer k"}
