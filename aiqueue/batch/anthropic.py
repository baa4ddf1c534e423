"""Anthropic's Message Batches API through the official SDK: one create holds every request.

The key goes in Anthropic's documented `x-api-key` header, with the SDK's
`anthropic-version`, and nowhere else: this SDK's release sends `api_key=` as
`Authorization: Bearer`, so that header is omitted (docs/overnight.md: the key is
sent as the provider's documentation says).  Errors become content-free codes,
as for OpenAI.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Literal, TypeVar

import anthropic

from aiqueue.batch.provider import (
    Handle,
    Limits,
    Line,
    Outcome,
    Polled,
    ProviderError,
    SdkErrors,
    answered,
    sdk_call,
    unanswered,
)

T = TypeVar("T")
# How long after the lane's record a lost create may have reached the provider.
_FIND_WINDOW_SECONDS = 300


class AnthropicBatches:
    """One pool's Anthropic batch account."""

    name: Literal["anthropic"] = "anthropic"
    limits = Limits(max_requests=100_000, max_bytes=256 * 1024 * 1024)

    def __init__(self, base_url: str, api_key: str, timeout: float = 60.0) -> None:
        # No SDK retries: a create retried after a lost answer would make (and bill) a
        # second batch; a lost answer is found by the record instead (find).
        # api_key= too: without it the SDK would look for credentials of its own.
        # (Omit is the SDK's "remove this header", which its stubs type as a str.)
        headers: dict[str, Any] = {"x-api-key": api_key, "authorization": anthropic.Omit()}
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url.removesuffix("/v1"), timeout=timeout,
            max_retries=0, default_headers=headers)

    async def upload(self, lines: Sequence[Line], tag: str) -> tuple[str, ...]:
        return ()  # one create holds every request

    async def create(self, lines: Sequence[Line], tag: str, files: Sequence[str]) -> Handle:
        requests: Any = [{"custom_id": line.custom_id, "params": line.body} for line in lines]
        batch = await _call(lambda: self.client.messages.batches.create(requests=requests))
        return Handle(batch.id)

    async def leftovers(self, tag: str) -> tuple[str, ...]:
        return ()

    async def delete_files(self, files: Sequence[str]) -> None:
        return None

    async def check(self) -> None:
        await _call(lambda: self.client.messages.batches.list(limit=1))

    async def find(self, tag: str, count: int, since: float,
                   known: Collection[str] = ()) -> Handle | None:
        """A batch with `count` requests created just after `since` that the lane never recorded.

        Message batches carry no metadata, so the lane's record (made before the
        create) gives the time, and the request count confirms it; a batch the lane
        has recorded (`known`) is never taken for a lost one.
        """
        page = await _call(lambda: self.client.messages.batches.list(limit=100))
        for batch in page.data:
            if batch.id in known:
                continue  # the lane's own, recorded
            created = batch.created_at.timestamp()
            counts = batch.request_counts
            total = (counts.processing + counts.succeeded + counts.errored + counts.canceled
                     + counts.expired)
            if since - 5 <= created <= since + _FIND_WINDOW_SECONDS and total == count:
                return Handle(batch.id)
        return None

    async def poll(self, handle: Handle) -> Polled:
        batch = await _call(lambda: self.client.messages.batches.retrieve(handle.batch_id))
        if batch.processing_status != "ended":
            return Polled("running", handle)
        return Polled("ended", handle, missing="canceled")

    async def results(self, polled: Polled) -> list[Outcome]:
        async def read() -> list[Outcome]:
            stream = await self.client.messages.batches.results(polled.handle.batch_id)
            return [_outcome(line.custom_id, line.result) async for line in stream]
        return await _call(read)

    async def cancel(self, handle: Handle) -> None:
        await _call(lambda: self.client.messages.batches.cancel(handle.batch_id))

    async def delete(self, handle: Handle) -> bool:
        try:
            await _call(lambda: self.client.messages.batches.delete(handle.batch_id))
        except ProviderError as exc:
            if exc.code == "provider_http_404":
                return True  # gone already
            if exc.code == "provider_http_400":
                return False  # still processing or cancelling
            raise
        return True

    async def aclose(self) -> None:
        await self.client.close()


def _outcome(custom_id: str, result: Any) -> Outcome:
    kind = getattr(result, "type", None)
    if kind == "succeeded":
        return answered(custom_id, result.message.model_dump(mode="json"))
    if kind in ("expired", "canceled"):
        return unanswered(custom_id, kind)
    error = getattr(getattr(result, "error", None), "error", None)
    return unanswered(custom_id, "errored", getattr(error, "type", None))


_ERRORS = SdkErrors(anthropic.APIStatusError, anthropic.APITimeoutError,
                    anthropic.APIConnectionError, anthropic.AnthropicError)


async def _call(make: Callable[[], Awaitable[T]]) -> T:
    return await sdk_call(make, _ERRORS)
