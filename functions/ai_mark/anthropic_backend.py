"""Anthropic's Messages API on its official SDK, with the prompt's shared prefix cached.

The prefix block (the question and the rubric, the same for every answer to an
assignment) carries `cache_control`: Anthropic writes it once and bills later
reads of it at a tenth of the input price.  The answer comes after it, last.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .errors import MalformedOutput, MarkingError
from .items import Marking
from .job import Job, safe_id
from .prompt import REPAIR, parse_marking, prompt_parts, system_prompt
from .ratelimit import retry_after

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

log = logging.getLogger(__name__)

# Enough for a mark and 2–4 sentences of feedback, with room to spare.
MAX_TOKENS = 1024
# A model's refusals: its budget ran out (429), or it is overloaded (503, 529).
_REFUSALS = {429: "rate_limited", 503: "overloaded", 529: "overloaded"}
# "This request can never succeed" (e.g. the answer overflows the context).
_PERMANENT_STATUSES = frozenset({400, 413, 422})


def messages_body(job: Job, model: str, ttl: str | None = None) -> dict[str, Any]:
    """The Messages API request for `job`: system, the cached prefix block, the answer.

    `ttl`: the cache entry's life ("1h" on the batch lane, whose requests may run
    long apart); None keeps Anthropic's default of 5 minutes from the last use.
    """
    prefix, answer = prompt_parts(job)
    mark: dict[str, str] = {"type": "ephemeral"}
    if ttl is not None:
        mark["ttl"] = ttl
    return {"model": model, "max_tokens": MAX_TOKENS, "temperature": 0,
            "system": system_prompt(job),
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": prefix, "cache_control": mark},
                {"type": "text", "text": answer}]}]}


def usage_counts(usage: Any) -> tuple[int, int, int, int]:
    """(prompt, completion, cache reads, cache writes) of an Anthropic usage object or dict.

    Anthropic's input_tokens leaves the cache out: the prompt is all three.
    """
    def get(name: str) -> int:
        value = usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
            else 0
    reads, writes = get("cache_read_input_tokens"), get("cache_creation_input_tokens")
    return get("input_tokens") + reads + writes, get("output_tokens"), reads, writes


class AnthropicBackend:
    """Marks with Claude through `anthropic.AsyncAnthropic` (the queue retries, not the SDK)."""

    name = "anthropic"

    def __init__(self, client: AsyncAnthropic, model: str) -> None:
        self.client = client
        self.model = model

    async def mark(self, job: Job) -> Marking:
        """Mark `job`; malformed output gets exactly one repair request."""
        body = messages_body(job, self.model)
        first = await self.create(body)
        replies = [first]
        try:
            score, feedback = parse_marking(first[0], job.max_score)
        except MalformedOutput as exc:
            log.warning("malformed model output queue_id=%s; repairing", safe_id(job.queue_id))
            repair = REPAIR.format(reason=exc.reason, max_score=f"{job.max_score:g}")
            second = await self.create({**body, "messages": [
                *body["messages"], {"role": "assistant", "content": first[0] or ""},
                {"role": "user", "content": repair}]})
            replies.append(second)
            try:
                score, feedback = parse_marking(second[0], job.max_score)
            except MalformedOutput:
                raise MarkingError("malformed_model_output", retryable=True) from None
        counts = [r[2] for r in replies]
        return Marking(score=score, feedback=feedback, model=replies[-1][1],
                       prompt_tokens=sum(c[0] for c in counts),
                       completion_tokens=sum(c[1] for c in counts),
                       cache_read_tokens=sum(c[2] for c in counts),
                       cache_write_tokens=sum(c[3] for c in counts))

    async def create(self, body: dict[str, Any]
                     ) -> tuple[str | None, str, tuple[int, int, int, int]]:
        """One Messages call: (text, model, usage counts); failures as MarkingError."""
        import anthropic

        # The SDK no longer takes sampling parameters by name; the API still does.
        fields = {k: v for k, v in body.items() if k != "temperature"}
        try:
            message = await self.client.messages.create(
                **fields, extra_body={"temperature": body["temperature"]})
        except anthropic.APITimeoutError:
            raise MarkingError("model_timeout", retryable=True) from None
        except anthropic.APIConnectionError:
            raise MarkingError("model_unreachable", retryable=True) from None
        except anthropic.APIStatusError as exc:
            status = exc.status_code
            refusal = _REFUSALS.get(status)
            if refusal is not None:
                raise MarkingError(refusal, retryable=True,
                                   retry_after=retry_after(exc.response.headers)) from None
            raise MarkingError(f"model_http_{status}",
                               retryable=status not in _PERMANENT_STATUSES) from None
        texts = [b.text for b in message.content if getattr(b, "type", None) == "text"]
        return ("".join(texts) if texts else None, message.model or self.model,
                usage_counts(message.usage))


def make_anthropic(api_key: str | None, base_url: str, model: str, timeout: float,
                   http_client: Any = None) -> AnthropicBackend:
    """The backend on a fresh SDK client (no retries of its own: the queue retries).

    `http_client`: the SDK's own HTTP client to use (tests give one with a mock transport).
    """
    from anthropic import AsyncAnthropic

    client = AsyncAnthropic(api_key=api_key or "", base_url=base_url, timeout=timeout,
                            max_retries=0, http_client=http_client)
    return AnthropicBackend(client, model)
