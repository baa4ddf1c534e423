"""The reference function and the provider's prompt cache (docs/prompt-cache.md): the payload first
and the answer last, `prompt_cache_key` for OpenAI-compatible servers, the Anthropic backend
on its official SDK with `cache_control` on the prefix block, cache counts relayed."""

from __future__ import annotations

import json
from typing import Any

import httpx
import httpx2
import pytest
import respx

from functions.ai_mark.anthropic_backend import AnthropicBackend, make_anthropic
from functions.ai_mark.backends import OpenAIBackend, make_backend
from functions.ai_mark.core import mark
from functions.ai_mark.errors import SettingsError
from functions.ai_mark.items import made_by
from functions.ai_mark.settings import Settings

from .conftest import ANSWER, OPENAI_URL, make_dispatch

KEY = "0123456789abcdef" * 4
GOOD = json.dumps({"score": 7, "feedback": "Good use of sunlight; inputs are missing."})
ANTHROPIC_URL = "https://anthropic.test"
MESSAGES = f"{ANTHROPIC_URL}/v1/messages"


def anthropic_reply(text: str, reads: int = 0, writes: int = 2000) -> httpx2.Response:
    """A recorded Messages API answer."""
    return httpx2.Response(200, json={
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 400, "output_tokens": 60, "cache_read_input_tokens": reads,
                  "cache_creation_input_tokens": writes}})


class Anthropic:
    """The Messages API behind the SDK's own HTTP client: answers in turn, requests kept."""

    def __init__(self, *answers: httpx2.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx2.Request] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def backend(self) -> AnthropicBackend:
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
        return make_anthropic("sk-ant", ANTHROPIC_URL, "claude-haiku-4-5", 120, client)

    def sent(self, index: int = -1) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.requests[index].content)
        return body


def sent(route: respx.Route, index: int = -1) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(route.calls[index].request.content)
    return body


async def test_openai_sends_the_cache_key_and_relays_the_cached_tokens(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(f"{OPENAI_URL}/v1/chat/completions").mock(
        return_value=httpx.Response(200, json={
            "model": "gpt-4o-mini", "choices": [{"message": {"content": GOOD}}],
            "usage": {"prompt_tokens": 2400, "completion_tokens": 60,
                      "prompt_tokens_details": {"cached_tokens": 1920}}}))
    async with httpx.AsyncClient() as client:
        backend = OpenAIBackend(client, "gpt-4o-mini", 120, OPENAI_URL, "sk")
        item = await mark({**make_dispatch(), "cache_key": KEY}, backend)
    body = sent(route)
    assert body["prompt_cache_key"] == KEY
    user = body["messages"][-1]["content"]
    assert user.index("What is photosynthesis?") < user.index("Rubric") < user.index(ANSWER)
    assert user.endswith("ANSWER>>>")
    assert item["usage"] == {"model": "gpt-4o-mini", "prompt_tokens": 2400,
                             "completion_tokens": 60, "cache_read_tokens": 1920,
                             **made_by("openai")}


async def test_without_a_key_none_is_sent(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(f"{OPENAI_URL}/v1/chat/completions").mock(
        return_value=httpx.Response(200, json={"choices": [{"message": {"content": GOOD}}],
                                               "usage": {"prompt_tokens": 5}}))
    async with httpx.AsyncClient() as client:
        backend = OpenAIBackend(client, "gpt-4o-mini", 120, OPENAI_URL, "sk")
        item = await mark(make_dispatch(), backend)
    assert "prompt_cache_key" not in sent(route)
    assert "cache_read_tokens" not in item["usage"]


async def test_anthropic_caches_the_prefix_block_and_relays_reads_and_writes() -> None:
    api = Anthropic(anthropic_reply(GOOD))
    item = await mark({**make_dispatch(), "cache_key": KEY}, api.backend())
    body = api.sent()
    assert str(api.requests[0].url) == MESSAGES
    headers = api.requests[0].headers
    assert "sk-ant" in (headers.get("x-api-key") or headers.get("authorization") or "")
    assert body["model"] == "claude-haiku-4-5" and "10" in body["system"]
    assert body["temperature"] == 0
    [message] = body["messages"]
    prefix, answer = message["content"]
    assert prefix["cache_control"] == {"type": "ephemeral"}
    assert "Rubric" in prefix["text"] and ANSWER not in prefix["text"]
    assert ANSWER in answer["text"] and "cache_control" not in answer
    assert item["status"] == "completed" and item["result"]["score"] == 7
    # Anthropic's input_tokens leaves the cache out: the prompt is all of it.
    assert item["usage"] == {"model": "claude-haiku-4-5", "prompt_tokens": 2400,
                             "completion_tokens": 60, "cache_read_tokens": 0,
                             "cache_write_tokens": 2000, **made_by("anthropic")}


async def test_anthropic_repairs_once() -> None:
    api = Anthropic(anthropic_reply("no json here"), anthropic_reply(GOOD, reads=2000, writes=0))
    item = await mark(make_dispatch(), api.backend())
    assert item["status"] == "completed"
    assert [m["role"] for m in api.sent()["messages"]] == ["user", "assistant", "user"]
    assert item["usage"]["cache_read_tokens"] == 2000
    assert item["usage"]["prompt_tokens"] == 4800


@pytest.mark.parametrize(("status", "code", "retryable"), [
    (429, "rate_limited", True), (529, "overloaded", True), (500, "model_http_500", True),
    (400, "model_http_400", False)])
async def test_anthropic_failures_are_the_functions_codes(status: int, code: str,
                                                          retryable: bool) -> None:
    api = Anthropic(httpx2.Response(status, headers={"retry-after": "7"},
                                    json={"type": "error", "error": {"type": "x",
                                                                     "message": "m"}}))
    item = await mark(make_dispatch(), api.backend())
    assert (item["status"], item["error"], item["retryable"]) == ("failed", code, retryable)
    if status == 429:
        assert item["retry_after"] == 7


async def test_anthropic_unreachable_is_retryable() -> None:
    api = Anthropic(httpx2.ConnectError("down"))
    item = await mark(make_dispatch(), api.backend())
    assert (item["error"], item["retryable"]) == ("model_unreachable", True)


async def test_the_anthropic_backend_is_chosen_and_needs_its_key() -> None:
    settings = Settings.from_env({"AI_MARK_BACKEND": "anthropic", "ANTHROPIC_API_KEY": "k",
                                  "AI_MARKING_FUNCTION_TOKEN": "t" * 32})
    async with httpx.AsyncClient() as client:
        backend = make_backend(settings, client)
    assert isinstance(backend, AnthropicBackend) and backend.model == "claude-haiku-4-5"
    with pytest.raises(SettingsError, match="ANTHROPIC_API_KEY"):
        Settings.from_env({"AI_MARK_BACKEND": "anthropic"})
