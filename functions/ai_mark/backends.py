"""Model backends: Ollama and OpenAI-compatible chat APIs, plus the factory."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from .anthropic_backend import make_anthropic
from .errors import MalformedOutput, MarkingError
from .items import Marking
from .job import Job, safe_id
from .prompt import Message, build_messages, parse_criteria, parse_marking, repair_messages
from .ratelimit import reset_after, retry_after
from .settings import Settings
from .simulate import SimulatorBackend

log = logging.getLogger(__name__)

# 400/413/422 mean "this request can never succeed" (e.g. the answer overflows the context);
# anything else (rate limits, 5xx, a model still loading, a bad key the operator fixes) may.
_PERMANENT_STATUSES = frozenset({400, 413, 422})
# A model's refusals: its budget ran out (429), or it is overloaded (503, and
# Anthropic's 529).
_REFUSALS = {429: "rate_limited", 503: "overloaded", 529: "overloaded"}


class Backend(Protocol):
    """Anything that turns a Job into a Marking or raises MarkingError."""

    name: str

    async def mark(self, job: Job) -> Marking: ...


@dataclass(frozen=True)
class ChatReply:
    """One chat completion: the text and what it cost."""

    text: str | None
    model: str
    prompt_tokens: int
    completion_tokens: int
    # Prompt tokens the provider read from its cache (None: it does not say).
    cache_read_tokens: int | None = None


class ChatBackend:
    """Marks with a chat model: prompt, check the JSON, ask for one repair if needed."""

    name = "chat"

    def __init__(self, client: httpx.AsyncClient, model: str, timeout: float) -> None:
        self.client = client
        self.model = model
        self.timeout = timeout

    async def mark(self, job: Job) -> Marking:
        """Mark `job`; malformed output gets exactly one repair request."""
        messages = build_messages(job)
        first = await self.chat(messages, job.cache_key)
        replies = [first]
        try:
            score, feedback = parse_marking(first.text, job.max_score)
            criteria = parse_criteria(first.text, job)
        except MalformedOutput as exc:
            log.warning("malformed model output queue_id=%s; repairing", safe_id(job.queue_id))
            repair = repair_messages(messages, first.text or "", exc.reason, job.max_score)
            second = await self.chat(repair, job.cache_key)
            replies.append(second)
            try:
                score, feedback = parse_marking(second.text, job.max_score)
                criteria = parse_criteria(second.text, job)
            except MalformedOutput:
                raise MarkingError("malformed_model_output", retryable=True) from None
        reads = [r.cache_read_tokens for r in replies if r.cache_read_tokens is not None]
        return Marking(
            score=score,
            feedback=feedback,
            model=replies[-1].model,
            prompt_tokens=sum(r.prompt_tokens for r in replies),
            completion_tokens=sum(r.completion_tokens for r in replies),
            cache_read_tokens=sum(reads) if reads else None,
            criteria=criteria,
        )

    async def chat(self, messages: list[Message], cache_key: str | None = None) -> ChatReply:
        """Send one chat request; subclasses say where and how.

        `cache_key`: the dispatch's prompt cache key, for APIs that route by one.
        """
        raise NotImplementedError

    async def post_json(
        self, url: str, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """POST to the model API, mapping every transport or HTTP failure to a MarkingError."""
        try:
            response = await self.client.post(url, json=body, headers=headers, timeout=self.timeout)
        except httpx.TimeoutException:
            raise MarkingError("model_timeout", retryable=True) from None
        except httpx.HTTPError:
            raise MarkingError("model_unreachable", retryable=True) from None
        refusal = _REFUSALS.get(response.status_code)
        if refusal is not None:
            # "Slow down", not a failure: the queue uses no attempt for it and
            # holds every dispatch for retry_after (docs/concepts.md).
            raise MarkingError(refusal, retryable=True,
                               retry_after=retry_after(response.headers),
                               reset_after=reset_after(response.headers))
        if response.status_code >= 300:
            retryable = response.status_code not in _PERMANENT_STATUSES
            raise MarkingError(f"model_http_{response.status_code}", retryable=retryable)
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise MarkingError("model_bad_response", retryable=True)
        return data


class OllamaBackend(ChatBackend):
    """Ollama's native `/api/chat` with JSON mode."""

    name = "ollama"

    def __init__(self, client: httpx.AsyncClient, model: str, timeout: float, url: str) -> None:
        super().__init__(client, model, timeout)
        self.url = f"{url.rstrip('/')}/api/chat"

    async def chat(self, messages: list[Message], cache_key: str | None = None) -> ChatReply:
        """One non-streaming Ollama chat call (Ollama keeps its own prefix cache)."""
        body = {
            "model": self.model,
            "messages": messages,
            "format": "json",
            "stream": False,
            "options": {"temperature": 0},
        }
        data = await self.post_json(self.url, body)
        message = data.get("message")
        text = message.get("content") if isinstance(message, dict) else None
        return ChatReply(
            text=text if isinstance(text, str) else None,
            model=_text(data.get("model"), self.model),
            prompt_tokens=_count(data.get("prompt_eval_count")),
            completion_tokens=_count(data.get("eval_count")),
        )


class OpenAIBackend(ChatBackend):
    """Any OpenAI-compatible `/v1/chat/completions` (OpenAI, vLLM, llama.cpp server)."""

    name = "openai"

    def __init__(
        self,
        client: httpx.AsyncClient,
        model: str,
        timeout: float,
        base_url: str,
        api_key: str | None,
    ) -> None:
        super().__init__(client, model, timeout)
        base = base_url.rstrip("/")
        # Accept both conventions: ".../v1" (as the OpenAI SDKs want it) and the bare host.
        self.url = f"{base if base.endswith('/v1') else base + '/v1'}/chat/completions"
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def chat(self, messages: list[Message], cache_key: str | None = None) -> ChatReply:
        """One chat completion in JSON-object mode; `prompt_cache_key` routes the rows that
        share a prefix to the machine that caches it."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "response_format": {"type": "json_object"},
            "temperature": 0,
        }
        if cache_key is not None:
            body["prompt_cache_key"] = cache_key
        data = await self.post_json(self.url, body, self.headers)
        choices = data.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        text = message.get("content") if isinstance(message, dict) else None
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        return ChatReply(
            text=text if isinstance(text, str) else None,
            model=_text(data.get("model"), self.model),
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
            cache_read_tokens=_count(cached) if cached is not None else None,
        )


def make_backend(settings: Settings, client: httpx.AsyncClient) -> Backend:
    """The backend `settings.backend` names."""
    if settings.backend == "ollama":
        return OllamaBackend(client, settings.model, settings.model_timeout, settings.ollama_url)
    if settings.backend == "openai":
        return OpenAIBackend(
            client,
            settings.model,
            settings.model_timeout,
            settings.openai_base_url,
            settings.openai_api_key,
        )
    if settings.backend == "anthropic":
        return make_anthropic(settings.anthropic_api_key, settings.anthropic_base_url,
                              settings.model, settings.model_timeout)
    return SimulatorBackend(settings.simulate_latency, settings.simulate_failure_rate)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _text(value: object, default: str) -> str:
    return value if isinstance(value, str) and value else default
