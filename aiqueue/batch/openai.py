"""OpenAI's Batch API through the official SDK: a JSONL file (`purpose=batch`), then a batch.

The SDK sends the key as `Authorization: Bearer …`. Its errors and lines
become content-free codes (provider.py: `sdk_call`, `unanswered`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Final, Literal, TypeVar

import openai

from aiqueue.batch.provider import (
    Handle,
    Limits,
    Line,
    LineKind,
    Outcome,
    Polled,
    ProviderError,
    SdkErrors,
    answered,
    sdk_call,
    unanswered,
)

ENDPOINT: Final = "/v1/chat/completions"
# The batch's metadata key that holds the lane's tag (the input file is named after it).
TAG_KEY: Final = "aiqueue_batch"
# A status the lane keeps looking at; the rest have ended.
_RUNNING = {"validating", "in_progress", "finalizing", "cancelling"}
_MISSING: dict[str, LineKind] = {"completed": "errored", "expired": "expired",
                                 "cancelled": "canceled"}
T = TypeVar("T")
# The provider's clock and ours may differ by this much (the lookup's lower bound).
_CLOCK_SLACK_SECONDS = 60


class OpenAIBatches:
    """One pool's OpenAI batch account."""

    name: Literal["openai"] = "openai"
    limits = Limits(max_requests=50_000, max_bytes=200 * 1024 * 1024, one_model=True)

    def __init__(self, base_url: str, api_key: str, timeout: float = 60.0) -> None:
        # No SDK retries: a create retried after a lost answer makes a second file or
        # batch (no idempotency key); reads are looked at again on a later step anyway.
        self.client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout,
                                         max_retries=0)

    async def upload(self, lines: Sequence[Line], tag: str) -> tuple[str, ...]:
        data = "".join(json.dumps({"custom_id": line.custom_id, "method": "POST",
                                   "url": ENDPOINT, "body": line.body}) + "\n"
                       for line in lines).encode()
        upload = await _call(lambda: self.client.files.create(
            file=(_file_name(tag), data), purpose="batch"))
        return (upload.id,)

    async def create(self, lines: Sequence[Line], tag: str, files: Sequence[str]) -> Handle:
        batch = await _call(lambda: self.client.batches.create(
            input_file_id=files[0], endpoint=ENDPOINT, completion_window="24h",
            metadata={TAG_KEY: tag}))
        return Handle(batch.id, tuple(files))

    async def find(self, tag: str, count: int, since: float,
                   known: Collection[str] = ()) -> Handle | None:
        """The batch tagged `tag` (metadata) that the lane never recorded, looked for page
        by page (newest first) back to the lane's intent at `since`: a busy account has
        made more than one page of batches since."""
        page = await _call(lambda: self.client.batches.list(limit=100))
        while True:
            for batch in page.data:
                if (batch.metadata or {}).get(TAG_KEY) == tag and batch.id not in known:
                    return Handle(batch.id).with_files(
                        batch.input_file_id, batch.output_file_id, batch.error_file_id)
                if batch.created_at < since - _CLOCK_SLACK_SECONDS:
                    return None  # made before the intent: the rest are older still
            if not page.has_next_page():
                return None
            page = await _call(page.get_next_page)

    async def leftovers(self, tag: str) -> tuple[str, ...]:
        page = await _call(lambda: self.client.files.list(purpose="batch"))
        return tuple(f.id for f in page.data if f.filename == _file_name(tag))

    async def delete_files(self, files: Sequence[str]) -> None:
        for file_id in files:
            await self._delete_file(file_id)

    async def check(self) -> None:
        await _call(lambda: self.client.batches.list(limit=1))

    async def poll(self, handle: Handle) -> Polled:
        batch = await _call(lambda: self.client.batches.retrieve(handle.batch_id))
        known = handle.with_files(batch.input_file_id, batch.output_file_id,
                                  batch.error_file_id)
        if batch.status in _RUNNING:
            return Polled("running", known)
        if batch.status == "failed":
            return Polled("failed", known)
        return Polled("ended", known, missing=_MISSING.get(batch.status, "errored"),
                      output_file=batch.output_file_id, error_file=batch.error_file_id)

    async def results(self, polled: Polled) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for file_id in (polled.output_file, polled.error_file):
            if file_id is not None:
                text = await self._text(file_id)
                outcomes += [_outcome(json.loads(raw)) for raw in text.splitlines()
                             if raw.strip()]
        return outcomes

    async def _text(self, file_id: str) -> str:
        content = await _call(lambda: self.client.files.content(file_id))
        return content.text

    async def cancel(self, handle: Handle) -> None:
        try:
            await _call(lambda: self.client.batches.cancel(handle.batch_id))
        except ProviderError as exc:
            if exc.code != "provider_http_409":  # it has ended already
                raise

    async def delete(self, handle: Handle) -> bool:
        try:
            polled = await self.poll(handle)
        except ProviderError as exc:
            if exc.code != "provider_http_404":
                raise
            polled = Polled("ended", handle)  # the batch is forgotten; its files may not be
        if polled.state == "running":
            return False  # its output files are not written yet
        for file_id in polled.handle.files:
            await self._delete_file(file_id)
        return True

    async def _delete_file(self, file_id: str) -> None:
        try:
            await _call(lambda: self.client.files.delete(file_id))
        except ProviderError as exc:
            if exc.code != "provider_http_404":  # gone already
                raise

    async def aclose(self) -> None:
        await self.client.close()


def _file_name(tag: str) -> str:
    return f"{tag}.jsonl"


def _outcome(line: dict[str, Any]) -> Outcome:
    """One output- or error-file line as an Outcome."""
    custom_id = str(line.get("custom_id", ""))
    response = line.get("response") or {}
    error = line.get("error") or {}
    if response.get("status_code") == 200 and isinstance(response.get("body"), dict):
        return answered(custom_id, response["body"])
    if error.get("code") == "batch_expired":
        return unanswered(custom_id, "expired")
    if error.get("code") == "batch_cancelled":
        return unanswered(custom_id, "canceled")
    return unanswered(custom_id, "errored", response.get("status_code"))


_ERRORS = SdkErrors(openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError,
                    openai.OpenAIError)


async def _call(make: Callable[[], Awaitable[T]]) -> T:
    return await sdk_call(make, _ERRORS)
