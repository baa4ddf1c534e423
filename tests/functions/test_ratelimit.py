"""A model's "slow down" (429, 503, 529) becomes a refusal with the wait it asked for."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
import respx

from functions.ai_mark.backends import OllamaBackend, OpenAIBackend
from functions.ai_mark.core import mark
from functions.ai_mark.ratelimit import parse_duration, reset_after, retry_after

from .conftest import OLLAMA_URL, OPENAI_URL, make_dispatch

OPENAI_CHAT = f"{OPENAI_URL}/v1/chat/completions"
NOW = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)

# What OpenAI sends with a 429 when the key's token budget ran out (header
# names and value formats as its API answers them).
OPENAI_TOKENS_429 = {
    "x-ratelimit-limit-requests": "10000",
    "x-ratelimit-limit-tokens": "2000000",
    "x-ratelimit-remaining-requests": "9999",
    "x-ratelimit-remaining-tokens": "0",
    "x-ratelimit-reset-requests": "6ms",
    "x-ratelimit-reset-tokens": "1m30.5s",
    "content-type": "application/json",
}


@pytest.mark.parametrize(("text", "seconds"), [
    ("6m0s", 360.0), ("1.5s", 1.5), ("20ms", 0.02), ("1h2m3s", 3723.0), ("0s", 0.0),
    ("59.123s", 59.123), ("2m", 120.0), ("", None), ("soon", None), ("5 s", None),
    ("1.5", None), ("-3s", None),
])
def test_openai_reset_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"retry-after-ms": "1234"}, 1.234),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the precise one first
    ({"retry-after": "7"}, 7.0),
    ({"retry-after": "Mon, 23 Nov 2026 12:00:30 GMT"}, 30.0),
    ({"retry-after": "Mon, 23 Nov 2026 11:59:00 GMT"}, 0.0),  # a date in the past: now
    (OPENAI_TOKENS_429, 90.5),  # the spent budget's reset, not the requests'
    ({**OPENAI_TOKENS_429, "x-ratelimit-remaining-tokens": "12",
      "x-ratelimit-remaining-requests": "0"}, 0.006),
    ({"x-ratelimit-reset-tokens": "2s", "x-ratelimit-reset-requests": "3s"}, 3.0),
    ({"retry-after": "86400"}, 3600.0),  # the queue takes at most an hour
    ({"retry-after": "later"}, None),
    ({}, None),
])
def test_the_wait_comes_from_the_headers(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after(httpx.Headers(headers), NOW) == seconds


def test_the_budgets_reset_is_relayed_beside_a_shorter_retry_after() -> None:
    """Azure's retry-after-ms is one call's wait; the reset says when the whole budget is
    back, from which the queue learns the model's window."""
    headers = {**OPENAI_TOKENS_429, "retry-after-ms": "300"}
    assert retry_after(httpx.Headers(headers), NOW) == 0.3
    assert reset_after(httpx.Headers(headers)) == 90.5
    assert reset_after(httpx.Headers({"retry-after": "7"})) is None


async def test_a_429_is_rate_limited_with_retry_after(respx_mock: respx.MockRouter) -> None:
    respx_mock.post(OPENAI_CHAT).mock(return_value=httpx.Response(
        429, headers=OPENAI_TOKENS_429,
        json={"error": {"message": "Rate limit reached for gpt-4o-mini", "type": "tokens",
                        "param": None, "code": "rate_limit_exceeded"}}))
    async with httpx.AsyncClient() as client:
        item = await mark(make_dispatch(), OpenAIBackend(client, "gpt-4o-mini", 5, OPENAI_URL,
                                                         "sk-test"))
    assert item["status"] == "failed" and item["error"] == "rate_limited"
    assert item["retry_after"] == 90.5 and item["retryable"] is True
    assert item["reset_after"] == 90.5


@pytest.mark.parametrize("status", [503, 529])
async def test_an_overloaded_model_is_overloaded(respx_mock: respx.MockRouter,
                                                 status: int) -> None:
    respx_mock.post(f"{OLLAMA_URL}/api/chat").mock(return_value=httpx.Response(
        status, headers={"retry-after": "2"}, json={"type": "error", "error": {
            "type": "overloaded_error", "message": "Overloaded"}}))
    async with httpx.AsyncClient() as client:
        item = await mark(make_dispatch(), OllamaBackend(client, "llama3.1:8b", 5, OLLAMA_URL))
    assert item["error"] == "overloaded" and item["retry_after"] == 2.0


async def test_a_refusal_without_a_wait_leaves_the_backoff_to_the_queue(
    respx_mock: respx.MockRouter,
) -> None:
    respx_mock.post(OPENAI_CHAT).mock(return_value=httpx.Response(429, json={}))
    async with httpx.AsyncClient() as client:
        item = await mark(make_dispatch(), OpenAIBackend(client, "m", 5, OPENAI_URL, None))
    assert item["error"] == "rate_limited" and "retry_after" not in item
